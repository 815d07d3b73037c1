/** sse-event.ts: an event's payload, and the fast path's text of a plain single-delta event. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eventData } from '../../src/http/event-stream.js';
import { CHAT_SHAPE, COMPLETION_SHAPE, PlainEvents, readPlainText } from '../../src/proxy/sse-event.js';

/** The fast path's reading: the text and its field's name, '' for none; null: left to the full parse. */
function plainDeltaText(event: string, shape = CHAT_SHAPE): { field: string; text: string } | '' | null {
  const out = { field: -1, text: '', at: -1 };
  if (!readPlainText(event, shape.quoted, out)) return null;
  return out.field < 0 || out.text === '' ? '' : { field: shape.fields[out.field], text: out.text };
}

const chat = (delta: object, extra: object = {}) =>
  `data: ${JSON.stringify({ id: 'x', choices: [{ index: 0, delta, finish_reason: null }], ...extra })}`;

test('eventData joins the data lines, with or without the space after the colon', () => {
  assert.equal(eventData('data: [DONE]'), '[DONE]');
  assert.equal(eventData('event: x\ndata:{"a":\ndata: 1}'), '{"a":1}');
  assert.equal(eventData(': a comment'), '');
});

test('readPlainText reads the text of a plain delta as JSON.parse would, escapes included, and names its field', () => {
  for (const content of ['hello', 'a "quoted" word', 'back\\slash', 'line\nbreak', 'é ✓', 'tab\tend\\']) {
    assert.deepEqual(plainDeltaText(chat({ content })), { field: 'content', text: content });
  }
  assert.equal(plainDeltaText(chat({ role: 'assistant' })), '', 'no text: plain, nothing to add');
  assert.equal(plainDeltaText(chat({ content: '' })), '');
  const completion = `data: ${JSON.stringify({ id: 'x', choices: [{ index: 0, text: 'abc', finish_reason: null }] })}`;
  assert.deepEqual(plainDeltaText(completion, COMPLETION_SHAPE), { field: 'text', text: 'abc' });
  // Reasoning, under either name, is read by the same fast path (one table of names).
  assert.deepEqual(plainDeltaText(chat({ reasoning_content: 'hm' })), { field: 'reasoning_content', text: 'hm' });
  assert.deepEqual(plainDeltaText(chat({ reasoning: 'so', content: null })), { field: 'reasoning', text: 'so' });
});

test('plainDeltaText leaves to the full parse what a continuation must know about', () => {
  const unusual = [
    chat({ content: 'a' }, { usage: { completion_tokens: 1 } }),
    `data: ${JSON.stringify({ id: 'x', choices: [{ index: 0, delta: { content: 'a' }, finish_reason: 'stop' }] })}`,
    chat({ tool_calls: [{ index: 0 }] }),
    chat({ reasoning: 'x', reasoning_content: 'x' }),
    chat({ reasoning: 'x', content: 'y' }),
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
  for (const event of unusual) assert.equal(plainDeltaText(event), null, event);
});

test('PlainEvents reads a stream like readPlainText, its template or not', () => {
  const reader = new PlainEvents(CHAT_SHAPE);
  const events = [
    chat({ role: 'assistant', content: '' }),
    chat({ content: 'one' }),
    chat({ content: 'two' }),
    chat({ content: 'a "quoted" word' }),
    chat({ content: 'line\nbreak' }),
    chat({ content: 'back\\slash' }),
    chat({ content: 'three' }),
    chat({ content: '' }),
    chat({ reasoning_content: 'hm' }),
    chat({ content: 'four' }, { usage: { completion_tokens: 4 } }),
    `data: ${JSON.stringify({ id: 'y', choices: [{ index: 0, delta: { content: 'five' }, finish_reason: null }] })}`,
    `data: ${JSON.stringify({ id: 'x', choices: [{ index: 0, delta: { content: 'x' }, finish_reason: 'stop' }] })}`,
    chat({ content: 'six' }),
  ];
  for (const event of events) {
    const fresh = { field: -1, text: '', at: -1 };
    const kept = { field: -1, text: '', at: -1 };
    const plain = readPlainText(event, CHAT_SHAPE.quoted, fresh);
    assert.equal(reader.read(event, kept), plain, event);
    if (plain) assert.deepEqual(kept, fresh, event);
  }
});
