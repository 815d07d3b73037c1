/**
 * http/top-level-fields.ts: a traced request's body read for its top-level fields without a parse.
 * Each case checks what a parse would say, including where a nested or quoted key could fool a search.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { topLevelFields } from '../../src/http/top-level-fields.js';

const KEYS = new Set(['model', 'max_tokens', 'temperature', 'stream', 'user']);
const fields = (text: string) => Object.fromEntries(topLevelFields(Buffer.from(text), KEYS));

test('reads the wanted top-level scalars, as JSON.parse reads them', () => {
  const body = {
    messages: [{ role: 'user', content: 'Say "model": "x", {not: [a, bracket' }],
    model: 'meta-llama/Llama-3.1-8B-Instruct',
    max_tokens: 20,
    temperature: 0.5,
    stream: true,
    user: null,
    seed: 7,
  };
  assert.deepEqual(fields(JSON.stringify(body)), {
    model: body.model,
    max_tokens: 20,
    temperature: 0.5,
    stream: true,
    user: null,
  });
  assert.deepEqual(fields(JSON.stringify(body, null, 2)), fields(JSON.stringify(body)));
});

test('a nested key of the same name is not the request field', () => {
  const body = {
    metadata: { model: 'nested', stream: false },
    tools: [{ type: 'function', function: { parameters: { properties: { temperature: { type: 'number' } } } } }],
    model: 'top',
  };
  assert.deepEqual(fields(JSON.stringify(body)), { model: 'top' });
});

test('escaped quotes and backslashes inside strings are skipped over', () => {
  const body = { messages: [{ content: 'a \\" b \\\\' }], note: 'ends in a backslash \\', model: 'm\u00e9 "q"' };
  assert.deepEqual(fields(JSON.stringify(body)), { model: 'm\u00e9 "q"' });
});

test('object and array values of a wanted key are not read', () => {
  assert.deepEqual(fields('{"model": {"name": "x"}, "stream": [true], "max_tokens": 3}'), { max_tokens: 3 });
});

test('what is not a JSON object yields what was read before it stopped being one', () => {
  assert.deepEqual(fields(''), {});
  assert.deepEqual(fields('[{"model": "x"}]'), {});
  assert.deepEqual(fields('not json'), {});
  assert.deepEqual(fields('{"model": "x", "max_tokens": 2'), { model: 'x', max_tokens: 2 });
  assert.deepEqual(fields('{"model": "x", "messages": [{"content": "unterminated'), { model: 'x' });
  assert.deepEqual(fields('{"model": "x" "stream": true}'), { model: 'x' });
  assert.deepEqual(fields('{"temperature": 1e, "model": "x"}'), {});
});
