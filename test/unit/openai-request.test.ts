/** routing/openai-request.ts: the one reading of a request's API (its path) and of a message's text. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { apiOf } from '../../src/proxy/continuation.js';
import { generationApiOf, messageText } from '../../src/routing/openai-request.js';

test('generationApiOf names the API of the three generation paths, query ignored, and nothing else', () => {
  assert.equal(generationApiOf('/v1/chat/completions'), 'chat');
  assert.equal(generationApiOf('/v1/chat/completions?x=1'), 'chat');
  assert.equal(generationApiOf('/v1/completions'), 'completion');
  assert.equal(generationApiOf('/generate'), 'generate');
  for (const other of ['/v1/models', '/v1/chat/completionsx', '/v1/chat', '/generate/x', '/', '/v1/embeddings']) {
    assert.equal(generationApiOf(other), null, other);
  }
  assert.equal(apiOf('/v1/completions?a'), 'completion');
  assert.equal(apiOf('/generate'), null, 'SGLang-native generation is not resumed');
});

test('messageText: strings as they are, text parts joined, other parts as their JSON, null as nothing', () => {
  assert.equal(messageText('hello'), 'hello');
  assert.equal(
    messageText([
      { type: 'text', text: 'a' },
      { type: 'text', text: 'b' },
    ]),
    'ab',
  );
  const image = { type: 'image_url', image_url: { url: 'data:x' } };
  assert.equal(messageText([{ type: 'text', text: 'see ' }, image]), `see ${JSON.stringify(image)}`);
  assert.equal(messageText(null), '');
  assert.equal(messageText(undefined), '');
  assert.equal(messageText(['one', 'two']), 'onetwo');
  assert.equal(messageText(7), '7');
});
