/**
 * `routing.cap_scope: fleet` (the default): the `auto` cap counts every replica's requests, as the
 * backend reports them, so two replicas (two registries, one backend) hold it near one cap, not two.
 * Built through `createRouting` and `createCapController` from a validated config, as app.ts wires them.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CapScope } from '../../src/config/types.js';
import { validateConfig } from '../../src/config/validate.js';
import { FleetRegistry } from '../../src/fleet/registry.js';
import { createCapController, createRouting } from '../../src/routing/fleet-routing.js';
import { QUEUE_ALLOWANCE } from '../../src/routing/load/backend-load.js';
import { CapController } from '../../src/routing/load/cap-controller.js';
import type { Lease } from '../../src/routing/queue/wait-queue.js';

const OK = { ok: true, reachable: true, reason: null };
const MAX_RUNNING = 8;
const CAP = MAX_RUNNING + QUEUE_ALLOWANCE;
const URL = 'http://127.0.0.1:41100';

/** One fleetgate replica in front of the shared backend: its own registry, caps and queue. */
function replica(scope: CapScope) {
  const config = validateConfig({ backends: [URL], routing: { cap_scope: scope } }, 'test');
  const registry = new FleetRegistry({ rise: 1, fall: 3, stallAfter: 60_000, defaultCap: 0 });
  const routing = createRouting(config, registry);
  createCapController(config, registry);
  const backend = registry.add({ url: URL, name: 'b0', kind: 'sglang', log: null });
  registry.apply(backend, { type: 'probe', result: OK });
  const queue = routing.queue.of(null);
  /** What the backend reports holding: every replica's requests. */
  const report = (running: number, queued = 0) =>
    registry.reportLoad(backend, { running, queued, tokenUsage: 0.5, maxRunning: MAX_RUNNING });
  /** Takes leases until one would wait. */
  const fill = () => {
    const leases: Lease[] = [];
    for (;;) {
      const got = queue.acquire();
      if (got instanceof Promise) {
        got.catch(() => {});
        queue.close();
        return leases;
      }
      leases.push(got);
    }
  };
  return { backend, report, fill };
}

test('two replicas with the auto cap hold a backend at one cap: the second sees the first one`s requests', () => {
  const a = replica('fleet');
  const b = replica('fleet');
  a.report(0);
  b.report(0);
  assert.equal(a.backend.cap, CAP, 'the first report opens the cap to max_running_requests + the allowance');
  const held = a.fill();
  assert.equal(held.length, CAP);
  // b's next report shows what a sent: the backend runs 8 and queues 2.
  b.report(MAX_RUNNING, QUEUE_ALLOWANCE);
  assert.equal(b.fill().length, 0, 'the backend is at its cap: b sends nothing more');
});

test('cap_scope: replica keeps the per-replica cap: the second replica sends a whole cap more', () => {
  const a = replica('replica');
  const b = replica('replica');
  a.report(0);
  b.report(0);
  assert.equal(a.fill().length, CAP);
  b.report(MAX_RUNNING, QUEUE_ALLOWANCE);
  assert.equal(b.fill().length, CAP, 'two caps on one backend');
});

test('fleet-wide, a queueing backend closes the cap to what it runs + the allowance, whoever sent it', () => {
  const registry = new FleetRegistry({ rise: 1, fall: 3, stallAfter: 60_000, defaultCap: 0 });
  new CapController({ registry, scraping: true, fleetWide: true });
  const backend = registry.add({ url: URL, name: 'b0', kind: 'sglang', log: null });
  const report = { running: 20, queued: 6, tokenUsage: 0.5, maxRunning: 32 };
  registry.reportLoad(backend, report);
  // This replica holds 5 of the 26 (inflightAtScrape 5): its own figure would close the cap to 1.
  registry.reportLoad(backend, report, 5);
  assert.equal(backend.cap, 20 + QUEUE_ALLOWANCE);
});
