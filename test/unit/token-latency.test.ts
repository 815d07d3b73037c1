/**
 * The pure parts of token latency: content events the stream's one reader finds, the clock's observations
 * (first token once, gaps per token, per-request figures on the backend that ended the stream), and
 * the serving view's windowed median of a histogram, with a fake clock.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HistogramSeries } from '../../src/metrics/backend-histogram.js';
import { bucketQuantile, WindowQuantile } from '../../src/metrics/window-quantile.js';
import { StreamJournal } from '../../src/proxy/stream-journal.js';
import { CHAT_SHAPE, streamShapeOf } from '../../src/proxy/stream-shape.js';
import { TokenClock, type TokenSeries } from '../../src/proxy/token-timing.js';

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
  interToken(seconds: number, count: number) {
    for (let i = 0; i < count; i++) this.seen.push(`itl ${seconds.toFixed(3)}`);
  }
  finished(tokens: number, perToken: number | null) {
    this.seen.push(`end ${tokens} ${perToken === null ? null : perToken.toFixed(3)}`);
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
