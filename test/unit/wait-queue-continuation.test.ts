/**
 * A stream's continuation (proxy/stream-resume.ts) in the wait queue: its client waits mid-answer,
 * so it waits at the head of its class, not behind the requests that arrived while it streamed.
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BackendConfig } from '../../src/config/types.js';
import { FleetRegistry } from '../../src/fleet/registry.js';
import { createPolicy } from '../../src/routing/policies/create-policy.js';
import type { Lease } from '../../src/routing/queue/wait-queue.js';
import { queueOn } from '../helpers/wait-queue.js';

test('a continuation waits at the head of its class and takes the next free slot', async () => {
  const registry = new FleetRegistry({ rise: 1, fall: 3, stallAfter: 60_000, defaultCap: 1 });
  const config: BackendConfig = { url: 'http://127.0.0.1:40000', name: 'b0', kind: 'sglang', log: null };
  const backend = registry.add(config);
  const queue = queueOn(registry, {
    maxWaiting: 10,
    timeoutMs: 5_000,
    policy: createPolicy('least-loaded'),
  });
  registry.apply(backend, { type: 'probe', result: { ok: true, reachable: true, reason: null } });
  const running = queue.acquire() as Lease;
  const order: string[] = [];
  const waiting = ['new 1', 'new 2'].map((name) =>
    (queue.acquire() as Promise<Lease>).then((lease) => {
      order.push(name);
      lease.release();
    }),
  );
  const continuation = (queue.acquire(undefined, undefined, undefined, true) as Promise<Lease>).then((lease) => {
    order.push('continuation');
    lease.release();
  });
  running.release();
  await Promise.all([...waiting, continuation]);
  assert.deepEqual(order, ['continuation', 'new 1', 'new 2']);
});
