import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TokenCache } from '../../src/model/token-cache.js';

const ids = (n: number) => Uint32Array.of(n);

test('the token cache: by content and role, at most `size` entries, the least recently used out first', () => {
  const cache = new TokenCache(4);
  cache.set('system', 'be brief', ids(1));
  assert.deepEqual(cache.get('system', 'be brief'), ids(1));
  assert.equal(cache.get('user', 'be brief'), undefined, 'another role: not this entry');
  // A system prompt every request repeats stays while messages used once pass through.
  for (let turn = 0; turn < 20; turn++) {
    cache.set('user', `question ${turn}`, ids(100 + turn));
    assert.deepEqual(cache.get('system', 'be brief'), ids(1), `turn ${turn}: the system prompt is held`);
  }
  const held = Array.from({ length: 20 }, (_, turn) => cache.get('user', `question ${turn}`) !== undefined);
  assert.deepEqual(held.slice(0, 17), Array(17).fill(false), 'the oldest questions out first');
  assert.deepEqual(held.slice(17), [true, true, true], 'three questions and the system prompt: four entries');
});

test("keep: the ids the cache holds for a text stay (the histories' memo knows them by identity); new ones are kept", () => {
  const cache = new TokenCache(8);
  const first = ids(7);
  assert.equal(cache.keep('assistant', 'Rack 12.', first), first);
  assert.equal(cache.keep('assistant', 'Rack 12.', ids(7)), first, 'the same text again: the held object');
  assert.equal(cache.get('assistant', 'Rack 12.'), first);
});
