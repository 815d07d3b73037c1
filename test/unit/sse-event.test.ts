/** sse-event.ts: an event's payload, and the fast path's text of a plain single-delta event. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eventData, plainDeltaText } from '../../src/proxy/sse-event.js';

const chat = (delta: object, extra: object = {}) =>
  `data: ${JSON.stringify({ id: 'x', choices: [{ index: 0, delta, finish_reason: null }], ...extra })}`;

test('eventData joins the data lines, with or without the space after the colon', () => {
  assert.equal(eventData('data: [DONE]'), '[DONE]');
  assert.equal(eventData('event: x\ndata:{"a":\ndata: 1}'), '{"a":1}');
  assert.equal(eventData(': a comment'), '');
});

test('plainDeltaText reads the text of a plain delta as JSON.parse would, escapes included', () => {
  for (const content of ['hello', 'a "quoted" word', 'back\\slash', 'line\nbreak', 'é ✓', 'tab\tend\\']) {
    assert.equal(plainDeltaText(chat({ content }), 'content'), content);
  }
  assert.equal(plainDeltaText(chat({ role: 'assistant' }), 'content'), '', 'no text: plain, nothing to add');
  assert.equal(plainDeltaText(chat({ content: '' }), 'content'), '');
  const completion = `data: ${JSON.stringify({ id: 'x', choices: [{ index: 0, text: 'abc', finish_reason: null }] })}`;
  assert.equal(plainDeltaText(completion, 'text'), 'abc');
});

test('plainDeltaText leaves to the full parse what a continuation must know about', () => {
  const unusual = [
    chat({ content: 'a' }, { usage: { completion_tokens: 1 } }),
    `data: ${JSON.stringify({ id: 'x', choices: [{ index: 0, delta: { content: 'a' }, finish_reason: 'stop' }] })}`,
    chat({ tool_calls: [{ index: 0 }] }),
    chat({ reasoning_content: 'hm' }),
    `data: ${JSON.stringify({ id: 'x', choices: [{ index: 0, delta: { content: 'a' }, logprobs: { content: [] } }] })}`,
    `data: ${JSON.stringify({ id: 'x', choices: [{ index: 1, delta: { content: 'a' } }] })}`,
    `data: ${JSON.stringify({
      choices: [
        { index: 0, delta: { content: 'a' } },
        { index: 0, delta: { content: 'b' } },
      ],
    })}`,
    'data: {"error":{"message":"boom"}}',
    'data: [DONE]',
    'data: {"id":"x",\ndata: "choices":[]}',
  ];
  for (const event of unusual) assert.equal(plainDeltaText(event, 'content'), null, event);
});
