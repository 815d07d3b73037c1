/**
 * The pure part of stream resume (src/proxy/continuation.ts): which requests may be continued, the
 * continuation's body, and the journal that frames, records and rewrites the events; plus the
 * sim's side (src/sim/text-gen.ts continuedFrom): where a given answer goes on.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bodyRefusal, continuationBody, remainingBudget } from '../../src/proxy/continuation.js';
import { CHAT_SHAPE } from '../../src/proxy/sse-event.js';
import { StreamJournal } from '../../src/proxy/stream-journal.js';
import { continuedFrom, outputText } from '../../src/sim/text-gen.js';
import { chatChunks } from '../helpers/chat-chunks.js';
import { readStream } from '../helpers/stream-check.js';

const chat = { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }], max_tokens: 50 };

test('bodyRefusal: what a continuation would change the meaning of is never resumed', () => {
  const cases: Array<[string, Record<string, unknown>, string | null]> = [
    ['plain chat', chat, null],
    ['n > 1', { ...chat, n: 2 }, 'n'],
    ['best_of > 1', { ...chat, best_of: 3 }, 'n'],
    ['json response_format', { ...chat, response_format: { type: 'json_object' } }, 'constrained'],
    ['text response_format', { ...chat, response_format: { type: 'text' } }, null],
    ['regex', { ...chat, regex: 'a+' }, 'constrained'],
    ['ebnf', { ...chat, ebnf: 'root ::= "a"' }, 'constrained'],
    ['json_schema', { ...chat, json_schema: '{}' }, 'constrained'],
    ['guided_json', { ...chat, guided_json: {} }, 'constrained'],
    ['logprobs', { ...chat, logprobs: true }, 'logprobs'],
    ['top_logprobs', { ...chat, top_logprobs: 2 }, 'logprobs'],
    ['no messages', { model: 'm' }, 'unbuildable'],
  ];
  for (const [what, body, want] of cases) assert.equal(bodyRefusal('chat', body), want, what);
  assert.equal(bodyRefusal('completion', { prompt: 'x', echo: true }), 'echo');
  assert.equal(bodyRefusal('completion', { prompt: 'x', suffix: 'y' }), 'suffix');
  assert.equal(bodyRefusal('completion', { prompt: 'x', logprobs: 0 }), 'logprobs');
  assert.equal(bodyRefusal('completion', { prompt: [1, 2, 3] }), 'unbuildable', 'token ids');
  assert.equal(bodyRefusal('completion', { prompt: ['a', 'b'] }), 'unbuildable', 'several prompts');
  assert.equal(bodyRefusal('completion', { prompt: ['a'] }), null);
  assert.equal(bodyRefusal('chat', null), 'unbuildable');
});

test('continuationBody: chat continues a final assistant message, completions extend the prompt, budgets shrink', () => {
  const body = continuationBody('chat', { ...chat, max_completion_tokens: 40, min_tokens: 5, seed: 3 }, ' Paris.', 2);
  assert.deepEqual(body.messages, [...chat.messages, { role: 'assistant', content: ' Paris.' }]);
  assert.equal(body.continue_final_message, true);
  assert.equal(body.add_generation_prompt, false);
  assert.equal(body.max_tokens, 48);
  assert.equal(body.max_completion_tokens, 38);
  assert.equal(body.min_tokens, 3);
  assert.equal(body.seed, 3, 'sampling parameters kept');
  // A client's own prefill is continued, not followed by a second assistant message.
  const prefilled = {
    ...chat,
    continue_final_message: true,
    messages: [...chat.messages, { role: 'assistant', content: 'Sure:' }],
  };
  const again = continuationBody('chat', prefilled, ' Paris', 1);
  assert.deepEqual((again.messages as unknown[]).at(-1), { role: 'assistant', content: 'Sure: Paris' });
  // A prefill in text parts is continued as one text; one with a part that is not text is never resumed.
  const parts = [
    { type: 'text', text: 'Sure' },
    { type: 'text', text: ':' },
  ];
  const inParts = { ...prefilled, messages: [...chat.messages, { role: 'assistant', content: parts }] };
  assert.equal(bodyRefusal('chat', inParts), null);
  assert.deepEqual((continuationBody('chat', inParts, ' Paris', 1).messages as unknown[]).at(-1), {
    role: 'assistant',
    content: 'Sure: Paris',
  });
  const withImage = {
    ...prefilled,
    messages: [
      ...chat.messages,
      { role: 'assistant', content: [...parts, { type: 'image_url', image_url: { url: 'x' } }] },
    ],
  };
  assert.equal(bodyRefusal('chat', withImage), 'unbuildable');
  assert.equal(
    bodyRefusal('chat', { ...withImage, continue_final_message: false }),
    null,
    'not a prefill: a new message follows',
  );
  const completion = continuationBody('completion', { prompt: 'Q:', max_tokens: 10 }, ' Paris', 1);
  assert.equal(completion.prompt, 'Q: Paris');
  assert.equal(completion.max_tokens, 9);
  assert.equal(continuationBody('chat', chat, '', 0), chat, 'nothing generated: the original body');
  assert.equal(remainingBudget({ max_tokens: 10, max_completion_tokens: 8 }, 3), 5);
  assert.equal(remainingBudget({}, 3), null);
});

test('journal: whole events only, an error event stops it, a continuation reads as the same stream', () => {
  const journal = new StreamJournal(CHAT_SHAPE);
  const first = Buffer.from(chatChunks('a', 0, 3, { role: true }));
  // Split inside the third token's event: only whole events go out.
  const cut = first.length - 10;
  const out1 = journal.feed(first.subarray(0, cut));
  assert.ok(out1.toString().endsWith('\n\n'));
  assert.equal(journal.text, outputText(2));
  const out2 = journal.feed(first.subarray(cut));
  assert.equal(Buffer.concat([out1, out2]).toString(), first.toString(), 'the first attempt passes as it came');
  assert.equal(journal.tokens, 3);
  const error = journal.feed(Buffer.from('data: {"error":{"message":"boom"}}\n\n'));
  assert.equal(error.length, 0);
  assert.ok(journal.errorEvent?.toString().includes('boom'));

  journal.beginAttempt(': resumed on gpu1 after gpu0 failed\n\n');
  const out3 = journal.feed(Buffer.from(chatChunks('b', 3, 4, { role: true, finish: true })));
  const whole = readStream(Buffer.concat([out1, out2, out3]).toString());
  assert.deepEqual(whole.comments, ['resumed on gpu1 after gpu0 failed']);
  assert.equal(whole.text, outputText(7));
  assert.equal(whole.roles, 1, 'the continuation sends no second role');
  assert.deepEqual([...whole.ids], ['a']);
  assert.ok(whole.events.every((e) => e.model === 'm-a' && e.created === 0));
  assert.deepEqual(whole.usage, { prompt_tokens: 20, completion_tokens: 7, total_tokens: 27 }, 'usage sums');
  assert.equal(whole.done, 1);
  assert.equal(journal.done, true);
});

test('journal: tool calls, reasoning and logprobs streamed forbid a continuation', () => {
  const event = (delta: object, logprobs: unknown = null) =>
    Buffer.from(
      `data: ${JSON.stringify({ id: 'x', choices: [{ index: 0, delta, logprobs, finish_reason: null }] })}\n\n`,
    );
  const cases: Array<[Buffer, string]> = [
    [event({ tool_calls: [{ index: 0, function: { name: 'f' } }] }), 'tool_calls'],
    [event({ reasoning_content: 'hm' }), 'reasoning'],
    [event({ reasoning: 'hm' }), 'reasoning'],
    [event({ content: 'a' }, { content: [] }), 'logprobs'],
  ];
  for (const [chunk, want] of cases) {
    const journal = new StreamJournal(CHAT_SHAPE);
    journal.feed(chunk);
    assert.equal(journal.refusal, want);
  }
});

test('sim continuedFrom: an answer given back is found whole, whatever precedes it', () => {
  for (const k of [0, 1, 2, 21, 22, 23, 60]) {
    assert.deepEqual(continuedFrom(outputText(k)), { before: '', tokens: k }, `k=${k}`);
    assert.deepEqual(continuedFrom(`Question?${outputText(k)}`), { before: 'Question?', tokens: k });
  }
  assert.equal(continuedFrom('nothing of the answer').tokens, 0);
});

test("journal: its state is read-only from outside, and a continuation's error event resets with the attempt", () => {
  const journal = new StreamJournal(CHAT_SHAPE);
  journal.feed(Buffer.from(chatChunks('a', 0, 1, { role: true })));
  journal.feed(Buffer.from('data: {"error":{"message":"boom"}}\n\n'));
  for (const key of ['done', 'finished', 'errorEvent', 'text', 'tokens', 'refusal']) {
    assert.equal(Reflect.set(journal, key, null), false, `${key} cannot be written`);
  }
  assert.ok(journal.errorEvent !== null);
  journal.beginAttempt(': resumed\n\n');
  assert.equal(journal.errorEvent, null);
  assert.equal(journal.finished, false);
  journal.feed(Buffer.from(chatChunks('b', 1, 1, { finish: true })));
  assert.equal(journal.finished, true);
});

test("journal: vLLM's `reasoning` deltas after the first event, an event cut across chunks, are read as reasoning", () => {
  const event = (delta: object, finish: string | null = null) =>
    `data: ${JSON.stringify({ id: 'v', object: 'chat.completion.chunk', model: 'm', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
  const stream =
    event({ role: 'assistant', content: '' }) +
    event({ reasoning: 'Rayleigh' }) +
    event({ reasoning: ' scattering' }) +
    event({ content: 'Blue.' }) +
    event({}, 'stop') +
    'data: [DONE]\n\n';
  // Cut inside the second reasoning event's JSON, and inside the first one's field name.
  const cuts = [stream.indexOf('scattering') + 3, stream.indexOf('"reasoning"') + 5];
  for (const cut of cuts) {
    for (const reframe of [true, false]) {
      const journal = new StreamJournal(CHAT_SHAPE, reframe);
      const out = Buffer.concat([
        journal.feed(Buffer.from(stream.slice(0, cut))),
        journal.feed(Buffer.from(stream.slice(cut))),
      ]);
      assert.equal(out.toString(), stream, 'the bytes pass unchanged');
      assert.equal(journal.reasoning, 'Rayleigh scattering', `cut at ${cut}, reframe ${reframe}`);
      assert.equal(journal.reasoningField, 'reasoning');
      assert.equal(journal.text, 'Blue.');
      assert.equal(journal.tokens, 3, 'two reasoning events and one answer event');
      assert.equal(journal.reasoningTokens, 2);
      assert.equal(journal.refusal, 'reasoning', 'a cut here is not resumed as text');
      assert.equal(journal.finished, true);
    }
  }
});
