import assert from 'node:assert/strict';
import { test } from 'node:test';
import { completionTokensIn } from '../../src/proxy/response-relay.js';

test('completion tokens: the last usage figure in the tail', () => {
  const chat = Buffer.from('{"usage":{"prompt_tokens":5,"total_tokens":37,"completion_tokens":32}}');
  assert.equal(completionTokensIn(chat), 32);
  const sse = Buffer.from(
    'data: {"usage":{"completion_tokens": 7}}\n\ndata: {"usage":{"completion_tokens": 12}}\n\ndata: [DONE]\n\n',
  );
  assert.equal(completionTokensIn(sse), 12);
  assert.equal(completionTokensIn(Buffer.from('{"meta_info":{"completion_tokens":0}}')), 0);
});

test('completion tokens: absent or cut figures are unknown', () => {
  assert.equal(completionTokensIn(null), null);
  assert.equal(completionTokensIn(Buffer.from('data: {"usage":null}\n\n')), null);
  assert.equal(completionTokensIn(Buffer.from('{"completion_tokens":')), null);
});
