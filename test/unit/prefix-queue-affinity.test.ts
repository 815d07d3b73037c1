/** A request queued in fleetgate holds out for its cached backend while another waiter is cached on the free one. */

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { BackendConfig } from '../../src/config/types.js';
import { FleetRegistry } from '../../src/fleet/registry.js';
import { LeastLoaded } from '../../src/routing/policies/basic-policies.js';
import { PrefixAware } from '../../src/routing/policies/prefix-aware.js';
import type { Lease } from '../../src/routing/queue/wait-queue.js';
import type { RequestTraits } from '../../src/routing/request-traits.js';
import { blockHashes } from '../../src/routing/text-hash.js';
import { queueOn } from '../helpers/wait-queue.js';

const OK = { ok: true, reachable: true, reason: null };
const BLOCK = 16;

function setup({ lookahead = 8, holdMs = 1_000 } = {}) {
  const clock = { now: 0 };
  const registry = new FleetRegistry({ rise: 1, fall: 3, stallAfter: 60_000, defaultCap: 1 });
  const list = [0, 1].map((i) => {
    const config: BackendConfig = { url: `http://127.0.0.1:${41000 + i}`, name: `b${i}`, kind: 'sglang', log: null };
    const backend = registry.add(config);
    registry.apply(backend, { type: 'probe', result: OK });
    return backend;
  });
  const policy = new PrefixAware(
    { maxBlocks: 1_000, ttlMs: 0, minMatch: 0.3, loadGap: 4, loadRatio: 1.5, balanceFactor: 0, now: () => clock.now },
    new LeastLoaded(),
  );
  const queue = queueOn(registry, {
    maxWaiting: 100,
    policy,
    affinityLookahead: lookahead,
    affinityHoldMs: holdMs,
    now: () => clock.now,
  });
  return { clock, list, queue };
}

function prompt(name: string): RequestTraits {
  const text = `${name}: ${'a long shared problem statement '.repeat(8)}`;
  return { priority: 'default', apiKey: null, prefix: blockHashes(text, BLOCK), blockChars: BLOCK } as RequestTraits;
}

describe('prefix-aware and the central queue', () => {
  test('a freed slot goes to the waiter cached there, and the head waits for its own cached backend', async () => {
    const { list, queue } = setup();
    const onB0 = queue.acquire(undefined, undefined, prompt('A')) as Lease;
    const onB1 = queue.acquire(undefined, undefined, prompt('B')) as Lease;
    assert.equal(onB0.backend, list[0]);
    assert.equal(onB1.backend, list[1]);
    // Both backends full: A's and B's siblings queue, A's first.
    const siblingA = queue.acquire(undefined, undefined, prompt('A')) as Promise<Lease>;
    const siblingB = queue.acquire(undefined, undefined, prompt('B')) as Promise<Lease>;
    onB1.release();
    // b1 freed: B's sibling (cached there) takes it, not A's (cached on b0) at the head.
    assert.equal((await siblingB).backend, list[1]);
    assert.equal(queue.waiting, 1);
    onB0.release();
    assert.equal((await siblingA).backend, list[0]);
  });

  test('a waiter cached nowhere goes first while the head holds out; with none left, the head takes the slot', async () => {
    const { list, queue } = setup();
    queue.acquire(undefined, undefined, prompt('A'));
    const onB1 = queue.acquire(undefined, undefined, prompt('B')) as Lease;
    const siblingA = queue.acquire(undefined, undefined, prompt('A')) as Promise<Lease>;
    const cold = queue.acquire(undefined, undefined, prompt('C')) as Promise<Lease>;
    const secondSiblingA = queue.acquire(undefined, undefined, prompt('A')) as Promise<Lease>;
    onB1.release();
    const coldLease = await cold;
    assert.equal(coldLease.backend, list[1]);
    assert.equal(queue.waiting, 2);
    // Only A's siblings wait, all cached on the busy b0: work-conserving, the head takes b1.
    coldLease.release();
    assert.equal((await siblingA).backend, list[1]);
    assert.equal(queue.waiting, 1);
    void secondSiblingA;
  });

  test('a head that waited longer than the hold is not passed over', async () => {
    const { clock, list, queue } = setup({ holdMs: 1_000 });
    queue.acquire(undefined, undefined, prompt('A'));
    const onB1 = queue.acquire(undefined, undefined, prompt('B')) as Lease;
    const siblingA = queue.acquire(undefined, undefined, prompt('A')) as Promise<Lease>;
    queue.acquire(undefined, undefined, prompt('B'));
    clock.now = 1_001;
    onB1.release();
    assert.equal((await siblingA).backend, list[1]);
  });

  test('lookahead 0 keeps the queue order', async () => {
    const { list, queue } = setup({ lookahead: 0 });
    queue.acquire(undefined, undefined, prompt('A'));
    const onB1 = queue.acquire(undefined, undefined, prompt('B')) as Lease;
    const siblingA = queue.acquire(undefined, undefined, prompt('A')) as Promise<Lease>;
    queue.acquire(undefined, undefined, prompt('B'));
    onB1.release();
    assert.equal((await siblingA).backend, list[1]);
  });
});
