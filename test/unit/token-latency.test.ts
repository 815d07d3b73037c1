/**
 * The pure parts of token latency: content events the stream's one reader finds, the clock's observations
 * (first token once, gaps per token, per-request figures on the backend that ended the stream), the
 * thinking figures (the first reasoning event is the first token, the first answer event its own
 * figure, reasoning tokens once at the end, through the relay), and the serving view's windowed
 * median of a histogram and share of two sums, with a fake clock.
 */
import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { HistogramSeries } from '../../src/metrics/backend-histogram.js';
import { bucketQuantile, WindowQuantile } from '../../src/metrics/window-quantile.js';
import { WindowShare } from '../../src/metrics/window-share.js';
import { reasoningTokensIn } from '../../src/proxy/answer-tail.js';
import { type RelayResult, relayBody } from '../../src/proxy/response-relay.js';
import { CHAT_SHAPE, streamShapeOf } from '../../src/proxy/sse-event.js';
import { StreamJournal } from '../../src/proxy/stream-journal.js';
import { TokenClock, type TokenSeries } from '../../src/proxy/token-timing.js';
import { ClientResponse } from '../helpers/client-response.js';

const event = (delta: object) => `data: ${JSON.stringify({ id: 'x', choices: [{ index: 0, delta }] })}\n\n`;

/** Content events the reader of a `path` stream finds in `chunks`, fed one by one as upstream reads. */
function contentEvents(path: string, chunks: Buffer[], reframe = false): number {
  const reader = new StreamJournal(streamShapeOf(path), reframe);
  let events = 0;
  for (const chunk of chunks) {
    reader.feed(chunk);
    events += reader.fedEvents;
  }
  return events;
}

test('content events: the answer and its reasoning (chat), text (completions), deltas (Responses), once per event', () => {
  const chat = Buffer.from(
    event({ role: 'assistant', content: '' }) +
      event({ reasoning_content: 'hmm' }) +
      event({ reasoning: 'so', content: null }) +
      // Newer vLLM fills both reasoning fields; the turn from reasoning to answer may carry both kinds.
      event({ reasoning: 'x', reasoning_content: 'x' }) +
      event({ reasoning: '.', content: 'Hello' }) +
      event({ content: ' "quoted"' }) +
      event({ tool_calls: [{ index: 0, function: { name: 'f', arguments: '{"content":"x"}' } }] }) +
      'data: [DONE]\n\n',
  );
  assert.equal(contentEvents('/v1/chat/completions', [chat]), 5);
  assert.equal(contentEvents('/v1/chat/completions', [chat], true), 5, 're-framed for a resume, the same');
  assert.equal(streamShapeOf('/v1/chat/completions?x=1'), CHAT_SHAPE);
  const completions = Buffer.from(
    `data: ${JSON.stringify({ choices: [{ index: 0, text: 'x', finish_reason: null }] })}\n\n` +
      `data: ${JSON.stringify({ choices: [{ index: 0, text: '', finish_reason: 'stop' }] })}\n\n`,
  );
  assert.equal(contentEvents('/v1/completions', [completions]), 1);
  assert.equal(contentEvents('/v1/chat/completions', [Buffer.from(': keep-alive\n\n')]), 0);
  const generate = Buffer.from(
    [{ text: 'a' }, { text: 'ab' }, { text: 'ab', meta_info: { finish_reason: { type: 'stop' } } }]
      .map((e) => `data: ${JSON.stringify(e)}\n\n`)
      .join(''),
  );
  assert.equal(contentEvents('/generate', [generate]), 3, 'SGLang /generate: cumulative text, one event each');
  // A Responses stream's text goes out in its deltas; the `done` events after them repeat it.
  const responses = Buffer.from(
    [
      { type: 'response.output_text.delta', delta: 'He' },
      { type: 'response.output_text.delta', delta: 'l' },
      { type: 'response.output_text.delta', delta: 'lo' },
      { type: 'response.output_text.done', text: 'Hello' },
      { type: 'response.content_part.done', part: { type: 'output_text', text: 'Hello' } },
    ]
      .map((e) => `data: ${JSON.stringify(e)}\n\n`)
      .join(''),
  );
  assert.equal(contentEvents('/v1/responses', [responses]), 3);
});

test('content events cut across upstream reads are counted once, wherever the cut falls', () => {
  const stream = Buffer.from(
    event({ role: 'assistant', content: '' }) +
      event({ reasoning_content: 'hm' }) +
      event({ reasoning: 'x', reasoning_content: 'x' }) +
      event({ content: 'Hi' }),
  );
  const counted = (chunks: Buffer[]) => contentEvents('/v1/chat/completions', chunks);
  for (let cut = 1; cut < stream.length; cut++) {
    assert.equal(counted([stream.subarray(0, cut), stream.subarray(cut)]), 3, `cut at ${cut}`);
  }
  const bytes = Array.from({ length: stream.length }, (_, i) => stream.subarray(i, i + 1));
  assert.equal(counted(bytes), 3, 'one byte per read');
});

class Recorder implements TokenSeries {
  readonly seen: string[] = [];
  constructor(readonly name: string) {}
  firstToken(stream: boolean, seconds: number) {
    this.seen.push(`ttft ${stream} ${seconds.toFixed(3)}`);
  }
  firstAnswer(seconds: number) {
    this.seen.push(`answer ${seconds.toFixed(3)}`);
  }
  interToken(seconds: number, count: number) {
    for (let i = 0; i < count; i++) this.seen.push(`itl ${seconds.toFixed(3)}`);
  }
  finished(tokens: number, perToken: number | null) {
    this.seen.push(`end ${tokens} ${perToken === null ? null : perToken.toFixed(3)}`);
  }
  reasoned(tokens: number) {
    this.seen.push(`reasoning ${tokens}`);
  }
}

test('clock: one first token, a gap per token (split evenly inside a chunk), the end on the last backend', () => {
  const a = new Recorder('a');
  const b = new Recorder('b');
  const observer = { seriesOf: (name: string) => (name === 'a' ? a : b) };
  const clock = new TokenClock(observer, 'a', true, 1000);
  clock.seen(1, 1100);
  clock.seen(2, 1140);
  clock.switchTo('b');
  clock.seen(1, 1400);
  clock.finished(1450, 4);
  assert.deepEqual(a.seen, ['ttft true 0.100', 'itl 0.020', 'itl 0.020']);
  assert.deepEqual(b.seen, ['itl 0.260', 'end 4 0.100']);
  assert.equal(clock.events, 4);
});

test('clock: a non-streamed answer is one first token at its end, counted by its usage; none without text', () => {
  const a = new Recorder('a');
  const clock = new TokenClock({ seriesOf: () => a }, 'a', false, 0);
  clock.finished(2500, 40);
  assert.deepEqual(a.seen, ['ttft false 2.500', 'end 40 null']);
  const silent = new Recorder('s');
  const stream = new TokenClock({ seriesOf: () => silent }, 's', true, 0);
  stream.finished(10, 0);
  assert.deepEqual(silent.seen, [], 'a stream with no generated text counts no output tokens');
  const embeddings = new Recorder('e');
  new TokenClock({ seriesOf: () => embeddings }, 'e', false, 0).finished(10, null);
  assert.deepEqual(embeddings.seen, []);
});

test('bucket quantile: linear inside the bucket, as histogram_quantile; null when empty', () => {
  const bounds = [0.1, 0.2, 0.4];
  assert.equal(bucketQuantile(0.5, bounds, [0, 0, 0]), null);
  assert.equal(bucketQuantile(0.5, bounds, [10, 0, 0]), 0.05);
  assert.ok(Math.abs((bucketQuantile(0.5, bounds, [0, 10, 10]) as number) - 0.2) < 1e-9);
  assert.ok(Math.abs((bucketQuantile(0.75, bounds, [0, 10, 10]) as number) - 0.3) < 1e-9);
});

test('window quantile: the median of what was observed in the last minute only', () => {
  const series = new HistogramSeries([0.01, 0.02, 0.05, 0.1, 1]);
  const window = new WindowQuantile(series, 60_000);
  window.sample(0);
  assert.equal(window.quantile(0.5), null);
  for (let i = 0; i < 100; i++) series.observe(0.08);
  window.sample(1_000);
  assert.ok((window.quantile(0.5) as number) > 0.05 && (window.quantile(0.5) as number) <= 0.1);
  for (let s = 2; s <= 70; s++) {
    if (s === 40) for (let i = 0; i < 100; i++) series.observe(0.015);
    window.sample(s * 1000);
  }
  const median = window.quantile(0.5) as number;
  assert.ok(median > 0.01 && median <= 0.02, `the slow minute left the window: ${median}`);
  for (let s = 71; s <= 140; s++) window.sample(s * 1000);
  assert.equal(window.quantile(0.5), null, 'nothing observed in the last minute');
});

/** Lets the stream events of this turn run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

const data = (body: object) => `data: ${JSON.stringify(body)}\n\n`;
const reasoningDelta = (text: string, field = 'reasoning_content') => event({ [field]: text });

/**
 * A chat stream through the relay and its one reader, timed by a clock on series `a`: each entry
 * of `chunks` goes upstream at its time (ms after the request arrived at 0), then the body ends.
 */
async function relayed(chunks: Array<[number, string]>, opts: { reframe?: boolean } = {}) {
  const series = new Recorder('a');
  const clock = new TokenClock({ seriesOf: () => series }, 'a', true, 0);
  const reader = new StreamJournal(CHAT_SHAPE, opts.reframe ?? false);
  const body = new PassThrough();
  let now = 0;
  const ended = new Promise<RelayResult>((resolve) => {
    relayBody(body, new ClientResponse() as unknown as ServerResponse, {
      sse: true,
      now: () => now,
      clientStallTimeout: 0,
      reader,
      tokens: clock,
      ended: resolve,
    });
  });
  for (const [at, chunk] of chunks) {
    now = at;
    body.write(chunk);
    await settle();
  }
  body.end();
  await ended;
  clock.finished(now, reader.tokens);
  return { seen: series.seen, clock, reader };
}

test('thinking: the first reasoning event is the first token; the first answer event is timed apart; reasoning tokens from the events', async () => {
  const { seen, clock } = await relayed([
    [100, event({ role: 'assistant', content: '' })],
    [150, reasoningDelta('\nLet') + reasoningDelta(' me')],
    [200, reasoningDelta(' think\n')],
    // The turn: the last reasoning and the first answer text in one read.
    [260, reasoningDelta('.') + event({ content: '\n\nParis' })],
    [300, event({ content: '.' }) + 'data: [DONE]\n\n'],
  ]);
  assert.deepEqual(seen, [
    'ttft true 0.150',
    'itl 0.000',
    'itl 0.050',
    'itl 0.030',
    'itl 0.030',
    'answer 0.260',
    'itl 0.040',
    'end 6 0.030',
    'reasoning 4',
  ]);
  assert.equal(clock.firstTokenAt, 150);
  assert.equal(clock.firstAnswerAt, 260);
});

test('thinking: the engine’s reasoning figure wins over the events (SGLang top-level, vLLM details); 0 from an old SGLang does not', async () => {
  const thinking = (field: string, usage: object) => [
    [10, reasoningDelta('a', field) + reasoningDelta('b', field)] as [number, string],
    [20, event({ content: 'c' })] as [number, string],
    [30, data({ id: 'x', choices: [], usage }) + 'data: [DONE]\n\n'] as [number, string],
  ];
  const sglang = await relayed(thinking('reasoning_content', { completion_tokens: 9, reasoning_tokens: 7 }));
  assert.deepEqual(sglang.seen.slice(-2), ['end 9 0.001', 'reasoning 7']);
  const vllm = await relayed(
    thinking('reasoning', {
      completion_tokens: 9,
      reasoning_tokens: 0,
      completion_tokens_details: { reasoning_tokens: 5 },
    }),
  );
  assert.deepEqual(vllm.seen.slice(-2), ['end 9 0.001', 'reasoning 5']);
  const oldSglang = await relayed(thinking('reasoning_content', { completion_tokens: 9, reasoning_tokens: 0 }));
  assert.deepEqual(oldSglang.seen.slice(-1), ['reasoning 2'], 'its events counted');
});

test('thinking: a stream without reasoning observes no reasoning figure; its first answer is its first token', async () => {
  const { seen } = await relayed([
    [40, event({ role: 'assistant', content: '' }) + event({ content: 'Hi' })],
    [
      90,
      event({ content: '!' }) + data({ id: 'x', choices: [], usage: { completion_tokens: 2, reasoning_tokens: 0 } }),
    ],
    [95, 'data: [DONE]\n\n'],
  ]);
  assert.deepEqual(seen, ['ttft true 0.040', 'answer 0.040', 'itl 0.050', 'end 2 0.050']);
});

test('thinking: a stream that spent its budget reasoning has a first token and reasoning tokens but no first answer', async () => {
  const { seen } = await relayed([
    [30, reasoningDelta('a') + reasoningDelta('b') + reasoningDelta('c')],
    [60, data({ id: 'x', choices: [{ index: 0, delta: {}, finish_reason: 'length' }] }) + 'data: [DONE]\n\n'],
  ]);
  assert.deepEqual(seen, ['ttft true 0.030', 'itl 0.000', 'itl 0.000', 'end 3 0.000', 'reasoning 3']);
});

test('thinking: reasoning tokens across a resume are each attempt’s own, summed', () => {
  const reader = new StreamJournal(CHAT_SHAPE, true);
  reader.feed(Buffer.from(event({ role: 'assistant', content: '' }) + reasoningDelta('a') + reasoningDelta('b')));
  assert.equal(reader.reasoningTokens, 2);
  assert.equal(reader.answered, false);
  reader.beginAttempt(': resumed\n\n');
  reader.feed(
    Buffer.from(
      reasoningDelta('c') +
        event({ content: 'd' }) +
        data({ id: 'y', choices: [], usage: { completion_tokens: 4, reasoning_tokens: 3 } }),
    ),
  );
  assert.equal(reader.answered, true);
  assert.equal(reader.reasoningTokens, 2 + 3, 'the cut attempt by its events, the continuation by its usage');
});

test('thinking: a non-streamed answer’s reasoning tokens come from its usage, read in its tail', async () => {
  const series = new Recorder('a');
  const clock = new TokenClock({ seriesOf: () => series }, 'a', false, 0);
  const body = new PassThrough();
  const ended = new Promise<RelayResult>((resolve) => {
    relayBody(body, new ClientResponse() as unknown as ServerResponse, {
      sse: false,
      now: () => 500,
      clientStallTimeout: 0,
      tokens: clock,
      ended: resolve,
    });
  });
  const usage = { prompt_tokens: 3, completion_tokens: 40, completion_tokens_details: { reasoning_tokens: 31 } };
  body.end(JSON.stringify({ id: 'x', choices: [{ message: { reasoning: 'r', content: 'c' } }], usage }));
  const result = await ended;
  clock.finished(500, 40);
  assert.deepEqual(series.seen, ['ttft false 0.500', 'end 40 null', 'reasoning 31']);
  assert.equal(reasoningTokensIn(result.tail), 31);
  assert.equal(reasoningTokensIn(Buffer.from('{"usage":{"completion_tokens":3}}')), null);
});

test('window share: the part over the whole of what was added in the last minute only', () => {
  const output = new HistogramSeries([1, 10, 100]);
  const reasoning = new HistogramSeries([1, 10, 100]);
  const share = new WindowShare(reasoning, output, 60_000);
  share.sample(0);
  assert.equal(share.share(), null);
  output.observe(100);
  reasoning.observe(25);
  share.sample(1_000);
  assert.equal(share.share(), 0.25);
  output.observe(100);
  share.sample(2_000);
  assert.equal(share.share(), 0.125, 'an answer without reasoning lowers the share');
  for (let s = 3; s <= 70; s++) share.sample(s * 1000);
  assert.equal(share.share(), null, 'nothing in the last minute');
});
