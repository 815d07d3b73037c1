import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PolicyName } from '../../src/config/types.js';
import { createPolicy, POLICIES } from '../../src/routing/policies/create-policy.js';
import type { Candidate } from '../../src/routing/policies/policy-contract.js';

function candidates(loads: number[]): Candidate[] {
  return loads.map((load, i) => ({ name: `b${i}`, load }));
}

/** A deterministic random(): cycles through the given values. */
function sequence(values: number[]): () => number {
  let i = 0;
  return () => values[i++ % values.length];
}

/**
 * A random() that draws every pair a two-draw pick out of `n` can make equally often: the middle of
 * each of the `n` strata for the first draw, then of the `n - 1` for the second, pair after pair.
 */
function everyPair(n: number): () => number {
  const draws: number[] = [];
  for (let i = 0; i < n; i++) for (let j = 0; j < n - 1; j++) draws.push((i + 0.5) / n, (j + 0.5) / (n - 1));
  return sequence(draws);
}

// The contract every policy passes.
for (const name of Object.keys(POLICIES) as PolicyName[]) {
  describe(`policy contract: ${name}`, () => {
    test('always picks one of the candidates', () => {
      const policy = createPolicy(name, { random: sequence([0.1, 0.7, 0.4, 0.99, 0]) });
      const list = candidates([3, 0, 5, 1]);
      for (let i = 0; i < 100; i++) assert.ok(list.includes(policy.pick(list)));
    });

    test('a single candidate is always picked', () => {
      const policy = createPolicy(name, { random: Math.random });
      const list = candidates([7]);
      assert.equal(policy.pick(list), list[0]);
    });

    test('with equal load and an even random(), each candidate gets exactly its share', () => {
      const policy = createPolicy(name, { random: everyPair(4) });
      const list = candidates([0, 0, 0, 0]);
      const counts = new Map(list.map((c) => [c.name, 0]));
      // 12 pairs of draws, 100 times each.
      for (let i = 0; i < 1200; i++) {
        const picked = policy.pick(list).name;
        counts.set(picked, (counts.get(picked) ?? 0) + 1);
      }
      assert.deepEqual([...counts.values()], [300, 300, 300, 300]);
    });
  });
}

describe('least-loaded', () => {
  test('picks the least loaded candidate', () => {
    const policy = createPolicy('least-loaded');
    assert.equal(policy.pick(candidates([4, 2, 9, 3])).name, 'b1');
  });

  test('ties are shared evenly (exactly round-robin among equals)', () => {
    const policy = createPolicy('least-loaded');
    const list = candidates([1, 1, 1]);
    const picks = Array.from({ length: 6 }, () => policy.pick(list).name);
    assert.deepEqual(picks, ['b0', 'b1', 'b2', 'b0', 'b1', 'b2']);
  });

  test('a backend with an idle batch slot comes first, even with more load; among them the fewest load', () => {
    const policy = createPolicy('least-loaded');
    // 'full' runs fewer but queues (its KV cache is the limit): a request sent there would wait.
    const roomy = { name: 'roomy', load: 30, idleSlot: true };
    const full = { name: 'full', load: 20, idleSlot: false };
    assert.equal(policy.pick([full, roomy]).name, 'roomy', 'the full one would queue it');
    assert.equal(policy.pick([roomy, full]).name, 'roomy');
    const roomier = { name: 'roomier', load: 12, idleSlot: true };
    assert.equal(policy.pick([roomy, full, roomier]).name, 'roomier');
    assert.equal(policy.pick([full, { ...full, name: 'full2', load: 40 }]).name, 'full', 'none idle: fewest load');
  });

  test('simulated dispatch keeps loads within one of each other', () => {
    const policy = createPolicy('least-loaded');
    const list = candidates([0, 0, 0, 0, 0]) as Array<{ name: string; load: number }>;
    for (let i = 0; i < 103; i++) policy.pick(list).load++;
    const loads = list.map((c) => c.load);
    assert.ok(Math.max(...loads) - Math.min(...loads) <= 1, String(loads));
  });
});

describe('round-robin', () => {
  test('cycles in order regardless of load', () => {
    const policy = createPolicy('round-robin');
    const list = candidates([9, 0, 5]);
    assert.deepEqual(
      Array.from({ length: 4 }, () => policy.pick(list).name),
      ['b0', 'b1', 'b2', 'b0'],
    );
  });
});

describe('power-of-two', () => {
  test('of the two sampled, the less loaded wins', () => {
    // random 0.0 -> index 0; second draw 0.99 over n-1 -> index 2 (skipping 0): loads 5 vs 1.
    const policy = createPolicy('power-of-two', { random: sequence([0, 0.99]) });
    assert.equal(policy.pick(candidates([5, 3, 1])).name, 'b2');
  });

  test('never samples the same candidate twice', () => {
    const policy = createPolicy('power-of-two', { random: sequence([0.5, 0.5]) });
    // i = 1, j = floor(0.5*2)=1 -> bumped to 2: compares b1 (load 4) and b2 (load 0).
    assert.equal(policy.pick(candidates([0, 4, 0])).name, 'b2');
  });

  test('exact share: the most loaded of three is never picked', () => {
    const draws: number[] = [];
    for (let i = 0; i < 3; i++) for (let j = 0; j < 2; j++) draws.push(i / 3 + 0.01, j / 2 + 0.01);
    const policy = createPolicy('power-of-two', { random: sequence(draws) });
    const list = candidates([0, 1, 2]);
    const picks = Array.from({ length: 6 }, () => policy.pick(list).name);
    assert.equal(picks.filter((p) => p === 'b2').length, 0);
    assert.equal(picks.filter((p) => p === 'b0').length, 4);
  });
});
