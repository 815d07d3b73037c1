/** The wait queue with prefix-aware routing: a waiter holds out for its cached backend while others go first. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BackendConfig } from '../../src/config/types.js';
import { FleetRegistry } from '../../src/fleet/registry.js';
import { createPolicy } from '../../src/routing/policies.js';
import { blockHashes } from '../../src/routing/request-traits.js';
import { type Lease, WaitQueue } from '../../src/routing/wait-queue.js';

const OK = { ok: true, reachable: true, reason: null };

function setup(preferWaitMs: number) {
  const clock = { now: 0 };
  const registry = new FleetRegistry({ rise: 1, fall: 3, stallAfter: 60_000, defaultCap: 1 });
  const list = [0, 1].map((i) => {
    const config: BackendConfig = { url: `http://127.0.0.1:${40000 + i}`, name: `b${i}`, kind: 'sglang', log: null };
    const backend = registry.add(config);
    registry.apply(backend, { type: 'probe', result: OK });
    return backend;
  });
  const queue = new WaitQueue({
    maxWaiting: 10,
    timeoutMs: 5_000,
    ready: () => registry.ready,
    policy: createPolicy('prefix-aware', { random: Math.random, now: () => clock.now, prefix: { loadGap: 4 } }),
    onRelease: (b) => registry.released(b),
    preferWaitMs,
    now: () => clock.now,
  });
  return { clock, list, queue };
}

const traits = (text: string) => ({ prefix: blockHashes(text.repeat(20), 16), blockChars: 16 });

test('a queued request waits for its cached backend and lets a later one take the other free slot', async () => {
  const { list, queue } = setup(1_000);
  const first = queue.acquire(undefined, undefined, traits('conversation A ')) as Lease;
  const other = queue.acquire(undefined, undefined, traits('conversation B ')) as Lease;
  assert.deepEqual([first.backend, other.backend], [list[0], list[1]]);
  // Both backends are at their cap of 1. A's next turn queues, then an unrelated request.
  const nextTurn = queue.acquire(undefined, undefined, traits('conversation A ')) as Promise<Lease>;
  const unrelated = queue.acquire(undefined, undefined, traits('conversation C ')) as Promise<Lease>;
  other.release();
  // b1 freed first: the unrelated request takes it, A's turn keeps its place for b0.
  assert.equal((await unrelated).backend, list[1]);
  assert.equal(queue.waiting, 1);
  first.release();
  assert.equal((await nextTurn).backend, list[0]);
});

test('past queue_wait the request takes whatever is free', async () => {
  const { clock, list, queue } = setup(1_000);
  const first = queue.acquire(undefined, undefined, traits('conversation A ')) as Lease;
  const other = queue.acquire(undefined, undefined, traits('conversation B ')) as Lease;
  const nextTurn = queue.acquire(undefined, undefined, traits('conversation A ')) as Promise<Lease>;
  clock.now = 1_001;
  other.release();
  assert.equal((await nextTurn).backend, list[1]);
  first.release();
});
