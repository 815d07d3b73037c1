/**
 * A top-class request goes to the ready backend with the fewest requests waiting in its own queue
 * (which fleetgate does not order), not where a lower-class request would go.
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BackendConfig } from '../../src/config/types.js';
import { type Backend, FleetRegistry } from '../../src/fleet/registry.js';
import { ownQueue } from '../../src/routing/load/backend-load.js';
import { createPolicy } from '../../src/routing/policies/create-policy.js';
import type { Lease, QueueClass } from '../../src/routing/queue/wait-queue.js';
import { queueOn } from '../helpers/wait-queue.js';

const OK = { ok: true, reachable: true, reason: null };
const cls = (name: string): QueueClass => ({ name, maxWaiting: 100, timeoutMs: 0, timeoutOnlyWhenNoneReady: false });

/**
 * Two ready backends, capped at 40, neither with an idle batch slot: `queued` has the lighter load
 * (24) but 4 waiting in its own queue; `full` runs all 32 of its slots with 1 waiting.
 */
function setup(classes: QueueClass[]) {
  const registry = new FleetRegistry({ rise: 1, fall: 3, stallAfter: 60_000, defaultCap: 40 });
  const add = (name: string, port: number): Backend => {
    const config: BackendConfig = { url: `http://127.0.0.1:${port}`, name, kind: 'sglang', log: null };
    const backend = registry.add(config);
    registry.apply(backend, { type: 'probe', result: OK });
    return backend;
  };
  const queued = add('queued', 40001);
  const full = add('full', 40002);
  registry.reportLoad(queued, { running: 20, queued: 4, tokenUsage: 0.9, maxRunning: 32 });
  registry.reportLoad(full, { running: 32, queued: 1, tokenUsage: 0.5, maxRunning: 32 });
  const queue = queueOn(registry, {
    maxWaiting: 100,
    classes,
    defaultClass: classes[classes.length - 1].name,
    now: () => 0,
    policy: createPolicy('least-loaded'),
  });
  return { queue, queued, full };
}

const leaseOf = (admitted: Lease | Promise<Lease>): Lease => {
  assert.ok(!(admitted instanceof Promise), 'served at once');
  return admitted;
};

test('a top-class request goes to the backend with the shorter queue of its own, though its load is higher', () => {
  const { queue, full } = setup([cls('interactive'), cls('batch')]);
  const lease = leaseOf(queue.acquire(undefined, undefined, { priority: 'interactive', apiKey: null }));
  assert.equal(lease.backend, full);
  lease.release();
});

test('a lower-class request is placed by the policy alone (least loaded)', () => {
  const { queue, queued } = setup([cls('interactive'), cls('batch')]);
  const lease = leaseOf(queue.acquire(undefined, undefined, { priority: 'batch', apiKey: null }));
  assert.equal(lease.backend, queued);
  lease.release();
});

test('with one class, nothing changes: the policy alone places every request', () => {
  const { queue, queued } = setup([cls('batch')]);
  const lease = leaseOf(queue.acquire(undefined, undefined, { priority: 'batch', apiKey: null }));
  assert.equal(lease.backend, queued);
  lease.release();
});

test("a backend's own queue counts down as fleetgate's requests on it end", () => {
  const reported = { running: 10, queued: 4, tokenUsage: 0.9, maxRunning: 32, inflightAtScrape: 14 };
  assert.equal(ownQueue({ reported, inflight: 14 }), 4);
  assert.equal(ownQueue({ reported, inflight: 11 }), 1, 'three ended: three of its queue were admitted');
  assert.equal(ownQueue({ reported, inflight: 8 }), 0);
  assert.equal(ownQueue({ reported: null, inflight: 8 }), 0, 'nothing reported: no queue known');
});
