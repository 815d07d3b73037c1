import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LeastLoaded } from '../../src/routing/policies/basic-policies.js';
import { KvAware, type KvCacheView, type KvDecision } from '../../src/routing/policies/kv-aware.js';
import type { Candidate } from '../../src/routing/policies/policy-contract.js';

const BLOCK = 16;
/** A 40-block prompt: 10 blocks of system prompt every backend holds, then the conversation's 30. */
const KEYS = Array.from({ length: 40 }, (_, i) => 1000 + i);

/** The map as fleet/kv-events/kv-events.ts reports it: leading blocks of `KEYS` held per backend. */
function view(runs: Record<string, number>, live = true): KvCacheView {
  return { anyLive: live, blockSize: BLOCK, leadingRuns: () => new Map(Object.entries(runs)) };
}

/** Picks the fallback makes are the first candidate's, so a test can tell them apart. */
const firstOne = { pick: <C extends Candidate>(candidates: readonly C[]) => candidates[0] };

function policy(runs: Record<string, number>, live = true) {
  const routed: Array<[KvDecision, number]> = [];
  const kv = new KvAware(
    { minMatch: 0.5, loadGap: 4, loadRatio: 1.5 },
    view(runs, live),
    firstOne,
    new LeastLoaded(),
    (decision, hit) => routed.push([decision, hit]),
  );
  return { kv, routed };
}

const traits = { kvKeys: KEYS, key: 7 };

describe('kv-aware', () => {
  test('the backend holding the longest run takes the request, reported as a cache hit of its tokens', () => {
    const { kv, routed } = policy({ a: 10, b: 38, c: 10 });
    const candidates = [
      { name: 'a', load: 0, idleSlot: true },
      { name: 'b', load: 3, idleSlot: true },
      { name: 'c', load: 1, idleSlot: true },
    ];
    assert.equal(kv.pick(candidates, traits).name, 'b');
    assert.deepEqual(routed, [['cache', 38 * BLOCK]]);
  });

  test('a conversation stays on its backend while that one is within the load guard, even with an idle slot elsewhere', () => {
    // Moving it would prefill its 28 blocks again for a slot; waiting costs less (bench:prefix, kv-multi-turn).
    const { kv, routed } = policy({ a: 10, b: 38 });
    const candidates = [
      { name: 'a', load: 0, idleSlot: true },
      { name: 'b', load: 4, idleSlot: false },
    ];
    assert.equal(kv.pick(candidates, traits).name, 'b');
    assert.deepEqual(routed, [['cache', 38 * BLOCK]]);
  });

  test('past both thresholds (load_gap and load_ratio) the least-loaded takes it', () => {
    const { kv, routed } = policy({ a: 10, b: 38 });
    const candidates = [
      { name: 'a', load: 1, idleSlot: true },
      { name: 'b', load: 9, idleSlot: false },
    ];
    assert.equal(kv.pick(candidates, traits).name, 'a');
    assert.deepEqual(routed, [['load', 10 * BLOCK]]);
  });

  test('a backend with an idle slot of its own is never overloaded', () => {
    const { kv } = policy({ a: 10, b: 38 });
    const candidates = [
      { name: 'a', load: 0, idleSlot: true },
      { name: 'b', load: 9, idleSlot: true },
    ];
    assert.equal(kv.pick(candidates, traits).name, 'b');
  });

  test('a run every backend holds (a system prompt) goes to the least loaded; a gain under min_match to the fallback', () => {
    const even = policy({ a: 10, b: 10, c: 10 });
    const candidates = [
      { name: 'a', load: 3 },
      { name: 'b', load: 1 },
      { name: 'c', load: 2 },
    ];
    assert.equal(even.kv.pick(candidates, traits).name, 'b', 'the least loaded, not the fallback (a)');
    assert.deepEqual(even.routed, [['cache', 10 * BLOCK]]);
    // b holds 24 of the 30 blocks a would prefill: 0.8 >= 0.5 decides; 12 of 30 (0.4) does not.
    const two = [
      { name: 'a', load: 0 },
      { name: 'b', load: 2 },
    ];
    assert.equal(policy({ a: 10, b: 34 }).kv.pick([two[1], two[0]], traits).name, 'b');
    const small = policy({ a: 10, b: 22 });
    assert.equal(small.kv.pick(two, traits).name, 'a');
    assert.equal(small.routed[0][0], 'none');
    const nothing = policy({});
    assert.equal(nothing.kv.pick([two[1], two[0]], traits).name, 'b', 'no block anywhere: the fallback');
    assert.equal(nothing.routed[0][0], 'none');
  });

  test('no keys, or no live events: the fallback routes it', () => {
    const candidates = [
      { name: 'a', load: 5 },
      { name: 'b', load: 0 },
    ];
    const noKeys = policy({ b: 38 });
    assert.equal(noKeys.kv.pick(candidates, { key: 7 }).name, 'a');
    const stale = policy({ b: 38 }, false);
    assert.equal(stale.kv.pick(candidates, traits).name, 'a');
    assert.deepEqual(
      [...noKeys.routed, ...stale.routed],
      [
        ['fallback', 0],
        ['fallback', 0],
      ],
    );
  });

  test('equal runs at equal load: two replicas pick the same backend (rendezvous on the key), whatever the order', () => {
    const candidates = [
      ...['a', 'b', 'c', 'd'].map((name) => ({ name, load: 1, idleSlot: true })),
      { name: 'e', load: 0, idleSlot: true },
    ];
    const runs = { a: 38, b: 38, c: 38, d: 38, e: 10 };
    for (let key = 0; key < 50; key++) {
      const one = policy(runs).kv.pick(candidates, { kvKeys: KEYS, key }).name;
      const other = policy(runs).kv.pick([...candidates].reverse(), { kvKeys: KEYS, key }).name;
      assert.equal(one, other, `key ${key}`);
    }
  });
});
