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
  learner.watch({ starts: [{ parent, at: 0 }], expect: [1, 2, 3, 4, 5], skip: 2, count: 1 }, ([ids]) =>
    learned.push([...ids]),
  );
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
  const one = (parent: number, expect: number[]) => ({ starts: [{ parent, at: 0 }], expect, skip: 0, count: 1 });
  learner.watch(one(1, [5, 5]), () => done++);
  store(learner, 2, [5, 5, 90, 91, 80, 81, 82, 0]);
  assert.equal(done, 0);
  for (let i = 0; i < 5000; i++) learner.watch(one(100 + i, [i]), () => done++);
  assert.equal(learner.watching, 4096);
  store(learner, 1, [5, 5, 90, 91, 80, 81, 82, 0]);
  assert.equal(done, 0, 'the first watch was dropped');
  store(learner, 100 + 4999, [4999, 1, 90, 91, 80, 81, 82, 0]);
  assert.equal(done, 1, 'the newest is held');
});

test("a turn's new messages, the last answer and the user's newest, split at their closes; the answer's opening known before the chain", () => {
  const learner = new TurnLearner(CLOSE, GENERATION);
  const learned: number[][][] = [];
  // The lead ends 2 tokens into its last block [1, 2, 80, 81]; its first two tokens [80, 81] open the
  // answer, as the generation prompt did, so an engine that answered the last turn holds that block:
  // the chain may hang from it as well as from the block before.
  const parent = 77;
  const held = chainKey(parent, [1, 2, 80, 81], 0, 4);
  const starts = [
    { parent, at: 0 },
    { parent: held, at: 4 },
  ];
  learner.watch({ starts, expect: [1, 2, 80, 81, 82], skip: 2, count: 2 }, (messages) =>
    learned.push(messages.map((ids) => [...ids])),
  );
  // The answer (82, its text 40 41 42, close), the user's message (70 71 72 73, close), the
  // generation prompt, then the engine's reasoning: the first close is followed by another opening,
  // not yet the end.
  store(learner, held, [82, 40, 41, 42, 90, 91, 70, 71, 72, 73, 90, 91, 80, 81, 82, 60, 61, 62, 63, 64]);
  assert.deepEqual(learned, [
    [
      [80, 81, 82, 40, 41, 42, 90, 91],
      [70, 71, 72, 73, 90, 91],
    ],
  ]);
  assert.equal(learner.watching, 0);
});

test('a chain whose last close is not followed by the generation prompt is another prompt: not learned', () => {
  const learner = new TurnLearner(CLOSE, GENERATION);
  let done = 0;
  learner.watch({ starts: [{ parent: 5, at: 0 }], expect: [1], skip: 0, count: 1 }, () => done++);
  // One message, then another user turn where the generation prompt should be.
  store(learner, 5, [1, 2, 90, 91, 70, 71, 72, 90, 91, 80, 81, 82]);
  assert.equal(done, 0);
  assert.equal(learner.watching, 0, 'given up');
  // A close split over two blocks is still found, and the generation prompt after a block boundary too.
  learner.watch({ starts: [{ parent: 6, at: 0 }], expect: [1], skip: 0, count: 1 }, () => done++);
  store(learner, 6, [1, 2, 3, 90, 91, 80, 81, 82]);
  assert.equal(done, 1);
});

test('where the engine held more of the expected start (a head other prompts share), the chain is taken up further in', () => {
  const learner = new TurnLearner(CLOSE, GENERATION);
  const learned: number[][] = [];
  // The lead's partial block [1, 2], then the head [3, 4, 5, 6, 7, 8]: a block [1, 2, 3, 4] other
  // prompts share may be held already, so the chain may hang from its key too.
  const shared = chainKey(50, [1, 2, 3, 4], 0, 4);
  const starts = [
    { parent: 50, at: 0 },
    { parent: shared, at: 4 },
  ];
  let keys: readonly number[] | null = null;
  learner.watch({ starts, expect: [1, 2, 3, 4, 5, 6, 7, 8], skip: 2, count: 1 }, ([ids], chainKeys) => {
    learned.push([...ids]);
    keys = chainKeys;
  });
  const last = store(learner, shared, [5, 6, 7, 8, 9, 90, 91, 80, 81, 82, 0, 0]);
  assert.deepEqual(learned, [[3, 4, 5, 6, 7, 8, 9, 90, 91]], "the held block's tokens are the expected ones");
  // The chain's keys from the lead on: the held block's (a start's), then the blocks stored, as the engine's events gave them.
  const chain = [1, 2, 3, 4, 5, 6, 7, 8, 9, 90, 91, 80, 81, 82, 0, 0];
  const expected = [shared, chainKey(shared, chain, 4, 8), chainKey(chainKey(shared, chain, 4, 8), chain, 8, 12)];
  assert.deepEqual(keys, [...expected, last]);
  assert.equal(learner.watching, 0);
  // A block hanging from the shared key that does not go on as expected is not the chain.
  learner.watch({ starts, expect: [1, 2, 3, 4, 5, 6, 7, 8], skip: 2, count: 1 }, () => assert.fail());
  store(learner, shared, [5, 6, 0, 8, 9, 90, 91, 80, 81, 82, 0, 0]);
  assert.equal(learner.watching, 1);
});

test("two engines' chains whose blocks interleave are both learned; another prompt's block at a watch's key that does not begin as expected leaves it waiting", () => {
  const learner = new TurnLearner(CLOSE, GENERATION);
  const learned: number[][] = [];
  const watch = (parent: number, first: number) =>
    learner.watch({ starts: [{ parent, at: 0 }], expect: [first], skip: 0, count: 1 }, ([ids]) =>
      learned.push([...ids]),
    );
  watch(10, 1);
  watch(20, 2);
  const a = [1, 11, 12, 13, 14, 15, 16, 17, 90, 91, 80, 81, 82, 0, 0, 0];
  const b = [2, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 90, 91, 80, 81, 82];
  const keysOf = (parent: number, tokens: number[]) => {
    const keys = [parent];
    for (let from = 0; from + BLOCK <= tokens.length; from += BLOCK)
      keys.push(chainKey(keys.at(-1) as number, tokens, from, from + BLOCK));
    return keys;
  };
  const [ka, kb] = [keysOf(10, a), keysOf(20, b)];
  // Another prompt's block hanging from the first watch's key: not its chain.
  learner.stored(10, 99, [7, 7, 7, 7], 0, BLOCK);
  for (let block = 0; block < 4; block++) {
    learner.stored(ka[block], ka[block + 1], a, block * BLOCK, (block + 1) * BLOCK);
    learner.stored(kb[block], kb[block + 1], b, block * BLOCK, (block + 1) * BLOCK);
  }
  assert.deepEqual(learned, [
    [1, 11, 12, 13, 14, 15, 16, 17, 90, 91],
    [2, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 90, 91],
  ]);
  assert.equal(learner.watching, 0);
});

test("a done watch follows the engine's answer; the next turn's watch takes the chain up after it; an answer opening with reasoning is not followed", () => {
  const THINK = 77;
  const learner = new TurnLearner(CLOSE, GENERATION, THINK);
  const learned: number[][][] = [];
  const keep = (messages: Uint32Array[]) => learned.push(messages.map((ids) => [...ids]));
  // A turn's prompt [1, 2, close | generation], then the engine's answer 40..48 as it generated it.
  learner.watch({ starts: [{ parent: 500, at: 0 }], expect: [1], skip: 0, count: 1 }, keep);
  const prompt = [1, 2, 90, 91, 80, 81, 82];
  const keys = [500];
  const chain = [...prompt, 40, 41, 42, 43, 44, 45, 46, 47, 48];
  for (let from = 0; from + BLOCK <= chain.length; from += BLOCK) {
    keys.push(chainKey(keys.at(-1) as number, chain, from, from + BLOCK));
    learner.stored(keys.at(-2) as number, keys.at(-1) as number, chain, from, from + BLOCK);
  }
  assert.deepEqual(learned, [[[1, 2, 90, 91]]]);
  assert.equal(learner.following, 1, 'its answer followed');
  // The next turn: the history keeps the answer as generated, so the engine's prefill goes on from
  // the answer's last block: 49 (the answer's last, unstored), its close, the user's message, close, generation.
  learner.watch({ starts: [{ parent: keys[1], at: 0 }], expect: [80, 81, 82], skip: 0, count: 2 }, keep);
  assert.equal(learner.following, 0, 'taken up by the next watch');
  const next = [49, 90, 91, 60, 61, 90, 91, 80, 81, 82, 0, 0];
  let parent = keys.at(-1) as number;
  for (let from = 0; from + BLOCK <= next.length; from += BLOCK) {
    const key = chainKey(parent, next, from, from + BLOCK);
    learner.stored(parent, key, next, from, from + BLOCK);
    parent = key;
  }
  assert.deepEqual(learned.at(-1), [
    [80, 81, 82, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 90, 91],
    [60, 61, 90, 91],
  ]);
  // A reasoning answer (opening with <think>): the next turn's history drops it; not followed.
  const following = learner.following;
  learner.watch({ starts: [{ parent: 900, at: 0 }], expect: [5], skip: 0, count: 1 }, keep);
  const thinking = [5, 6, 90, 91, 80, 81, 82, THINK, 8, 8, 8, 8];
  let at = 900;
  for (let from = 0; from + BLOCK <= thinking.length; from += BLOCK) {
    const key = chainKey(at, thinking, from, from + BLOCK);
    learner.stored(at, key, thinking, from, from + BLOCK);
    at = key;
  }
  assert.deepEqual(learned.at(-1), [[5, 6, 90, 91]]);
  assert.equal(learner.following, following, 'a reasoning answer is not followed');
});

test('a watch on its way (its head tokenized in the background) replays the blocks stored before it came', () => {
  const learner = new TurnLearner(CLOSE, GENERATION);
  const learned: number[][] = [];
  const arrived = learner.kept.onTheWay();
  // The engine prefills and answers before the watch is asked for; another prompt's chain too.
  store(learner, 300, [9, 9, 9, 9, 90, 91, 80, 81, 82, 0, 0, 0]);
  store(learner, 300, [1, 2, 3, 4, 5, 6, 90, 91, 80, 81, 82, 33]);
  learner.watch({ starts: [{ parent: 300, at: 0 }], expect: [1, 2], skip: 0, count: 1 }, ([ids]) =>
    learned.push([...ids]),
  );
  arrived();
  assert.deepEqual(learned, [[1, 2, 3, 4, 5, 6, 90, 91]], 'learned from the kept blocks');
  // With no watch on its way, blocks are not kept: a late watch learns nothing.
  store(learner, 400, [1, 2, 3, 4, 5, 6, 90, 91, 80, 81, 82, 33]);
  learner.watch({ starts: [{ parent: 400, at: 0 }], expect: [1, 2], skip: 0, count: 1 }, () => assert.fail());
  assert.equal(learner.watching, 1);
});
