import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chainKey } from '../../src/fleet/kv-events/block-keys.js';
import { TurnLearner } from '../../src/proxy/kv-turn-learner.js';

const CLOSE = [90, 91];
const GENERATION = [80, 81, 82];
const BLOCK = 4;

/** Feeds `tokens` to the learner as an engine's stored blocks hanging from `parent`, as kv-block-map.ts does. */
function store(learner: TurnLearner, parent: number, tokens: number[]): number {
  let key = parent;
  for (let from = 0; from + BLOCK <= tokens.length; from += BLOCK) {
    const next = chainKey(key, tokens, from, from + BLOCK);
    learner.stored(key, next, tokens, from, from + BLOCK);
    key = next;
  }
  return key;
}

test("a watched message's ids come from the engine's chain: from the head on, up to its close before the generation prompt", () => {
  const learner = new TurnLearner(CLOSE, GENERATION);
  const learned: number[][] = [];
  const parent = 1234;
  // The lead's partial block [1, 2], then the message [3, 4, 5, 6, 7, 8] and its close.
  learner.watch(parent, [1, 2, 3, 4, 5], 2, (ids) => learned.push([...ids]));
  // Another prompt on the same lead, another message: not this watch's chain.
  store(learner, parent, [1, 2, 7, 7, 7, 7, 90, 91, 80, 81, 82, 0]);
  assert.deepEqual(learned, []);
  assert.equal(learner.watching, 1);
  // The answer's tokens follow the generation prompt in the same chain: they are not the message's.
  store(learner, parent, [1, 2, 3, 4, 5, 6, 7, 8, 90, 91, 80, 81, 82, 33, 34, 35]);
  assert.deepEqual(learned, [[3, 4, 5, 6, 7, 8, 90, 91]]);
  assert.equal(learner.watching, 0, 'done watches go');
});

test('blocks hanging from another key are not looked at; at most 4,096 watches are held, the oldest dropped', () => {
  const learner = new TurnLearner(CLOSE, GENERATION);
  let done = 0;
  learner.watch(1, [5, 5], 0, () => done++);
  store(learner, 2, [5, 5, 90, 91, 80, 81, 82, 0]);
  assert.equal(done, 0);
  for (let i = 0; i < 5000; i++) learner.watch(100 + i, [i], 0, () => done++);
  assert.equal(learner.watching, 4096);
  store(learner, 1, [5, 5, 90, 91, 80, 81, 82, 0]);
  assert.equal(done, 0, 'the first watch was dropped');
  store(learner, 100 + 4999, [4999, 1, 90, 91, 80, 81, 82, 0]);
  assert.equal(done, 1, 'the newest is held');
});
