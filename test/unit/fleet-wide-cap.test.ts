/**
 * A numeric `max_inflight_per_backend` with load reports is one cap for every replica: it holds
 * against what the backend reports running and queued (other replicas' requests included) plus this
 * replica's dispatches since, and a report showing others' requests ended lets waiters in.
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FleetRegistry } from '../../src/fleet/registry.js';
import { LeastLoaded } from '../../src/routing/policies/basic-policies.js';
import type { Lease } from '../../src/routing/queue/wait-queue.js';
import { queueOn } from '../helpers/wait-queue.js';

const OK = { ok: true, reachable: true, reason: null };
const report = (running: number) => ({ running, queued: 0, tokenUsage: 0.1, maxRunning: 64 });

/** One replica's queue over one backend with a fixed cap; `capShare` is `routing.replicas`. */
function setup(fleetWideCap: boolean, { cap = 4, capShare }: { cap?: number; capShare?: number } = {}) {
  const registry = new FleetRegistry({ rise: 1, fall: 3, stallAfter: 60_000, defaultCap: cap });
  const backend = registry.add({ url: 'http://127.0.0.1:41000', name: 'b0', kind: 'sglang', log: null });
  registry.apply(backend, { type: 'probe', result: OK });
  const queue = queueOn(registry, {
    maxWaiting: 100,
    policy: new LeastLoaded(),
    fleetWideCap,
    replicas: capShare,
  });
  return { registry, backend, queue };
}

const isLease = (x: Lease | Promise<Lease>): x is Lease => !(x instanceof Promise);

test('the cap counts the backend-reported load: another replica holding 3 of 4 leaves one slot here', async () => {
  const { registry, backend, queue } = setup(true);
  registry.reportLoad(backend, report(3));
  const first = queue.acquire();
  assert.ok(isLease(first), 'one slot is left');
  const second = queue.acquire();
  assert.ok(second instanceof Promise, 'the second waits: 3 elsewhere + 1 here = the cap');
  assert.equal(queue.waiting, 1);
  // The next report: the other replica's requests ended; this replica's one is now in `running`.
  registry.reportLoad(backend, report(1));
  const lease = await second;
  assert.equal(lease.backend, backend);
  assert.equal(queue.waiting, 0);
  first.release();
  lease.release();
});

test('without it (auto caps, or no reports) the cap counts only this replica: 4 go at once', () => {
  const { registry, backend, queue } = setup(false);
  registry.reportLoad(backend, report(3));
  const leases = [queue.acquire(), queue.acquire(), queue.acquire(), queue.acquire()];
  assert.ok(leases.every(isLease));
  assert.ok(queue.acquire() instanceof Promise);
});

test('routing.replicas N: between two reports a replica takes 1/N of the room the last one showed', () => {
  const { registry, backend, queue } = setup(true, { cap: 8, capShare: 2 });
  // Room for 8 at the report: two replicas meeting the same burst take 4 each, not 8 each.
  registry.reportLoad(backend, report(0));
  const leases = Array.from({ length: 4 }, () => queue.acquire());
  assert.ok(leases.every(isLease));
  assert.ok(queue.acquire() instanceof Promise, 'the fifth waits for the next report');
  // One of its own ended: that slot is known free, so it refills it at once.
  (leases[0] as Lease).release();
  assert.equal(queue.waiting, 0, 'the waiter took the slot its own request freed');
});

test('routing.replicas N: a backend not read yet takes 1/N of the cap from each replica', () => {
  const { registry, backend, queue } = setup(true, { cap: 8, capShare: 2 });
  // No report yet: the other replica may be filling the same backend, unseen.
  const leases = Array.from({ length: 4 }, () => queue.acquire());
  assert.ok(leases.every(isLease));
  const fifth = queue.acquire();
  assert.ok(fifth instanceof Promise, 'half of the cap of 8 until a report says what the backend holds');
  // The first report: the backend holds only these 4, so the room is 4 and this replica's share 2.
  registry.reportLoad(backend, report(4));
  assert.equal(queue.waiting, 0, 'the waiter went in');
  assert.ok(isLease(queue.acquire()));
  const waiting = queue.acquire();
  assert.ok(waiting instanceof Promise, 'its share of the room is taken');
  waiting.catch(() => {});
  queue.close();
});
