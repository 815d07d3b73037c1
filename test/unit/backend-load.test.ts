import assert from 'node:assert/strict';
import { test } from 'node:test';
import { backendLoad, hasIdleSlot } from '../../src/routing/load/backend-load.js';

test("a backend's load: reported running + queued + fleetgate's net dispatches since the scrape", () => {
  assert.equal(backendLoad({ inflight: 2, reported: null }), 2, 'in-flight only without a report');
  const reported = { running: 10, queued: 4, tokenUsage: 0.3, maxRunning: null, inflightAtScrape: 2 };
  assert.equal(backendLoad({ inflight: 2, reported }), 14);
  assert.equal(backendLoad({ inflight: 5, reported }), 17, 'three more dispatched since the scrape');
  const idle = { running: 0, queued: 0, tokenUsage: 0, maxRunning: null, inflightAtScrape: 5 };
  assert.equal(backendLoad({ inflight: 5, reported: idle }), 5, 'never below what fleetgate itself has in flight');
});

test('with N replicas, each dispatch since the report counts N times; an ending counts once', () => {
  const reported = { running: 10, queued: 4, tokenUsage: 0.3, maxRunning: 16, inflightAtScrape: 2 };
  assert.equal(backendLoad({ inflight: 5, reported }, 3), 14 + 3 * 3, 'the other two replicas sent about as many');
  assert.equal(backendLoad({ inflight: 1, reported }, 3), 13, "the others' endings are not assumed");
  assert.equal(backendLoad({ inflight: 2, reported }, 3), 14, 'nothing sent since: the report alone');
  const idle = { running: 0, queued: 0, tokenUsage: 0, maxRunning: 4, inflightAtScrape: 0 };
  assert.equal(hasIdleSlot({ inflight: 1, reported: idle }, 3), true, '3 of 4 slots taken, fleet-wide');
  assert.equal(hasIdleSlot({ inflight: 2, reported: idle }, 3), false, '6 of 4: the burst filled them');
  assert.equal(hasIdleSlot({ inflight: 2, reported: idle }), true, 'one replica: 2 of 4');
});

test('with N replicas, own requests the report missed (still on the wire) count as sent since, N times', () => {
  const onTheWire = { running: 0, queued: 0, tokenUsage: 0, maxRunning: 8, inflightAtScrape: 5 };
  assert.equal(backendLoad({ inflight: 5, reported: onTheWire }, 2), 10, 'the other replica had as many on the wire');
  assert.equal(backendLoad({ inflight: 5, reported: onTheWire }), 5, 'one replica: its own in-flight, as before');
  const partly = { running: 3, queued: 0, tokenUsage: 0, maxRunning: 8, inflightAtScrape: 5 };
  assert.equal(backendLoad({ inflight: 6, reported: partly }, 2), 3 + 2 * 3, '2 missed + 1 sent since, twice each');
  assert.equal(backendLoad({ inflight: 3, reported: partly }, 2), 3, 'two ended since: counted once');
  const seen = { running: 9, queued: 0, tokenUsage: 0, maxRunning: 8, inflightAtScrape: 5 };
  assert.equal(backendLoad({ inflight: 5, reported: seen }, 2), 9, 'all seen: the report alone');
});

test('idle batch slots: fewer running than max_running_requests; one arrival between steps is no queue', () => {
  const report = { running: 4, queued: 0, tokenUsage: 0.1, maxRunning: 32, inflightAtScrape: 5 };
  const idle = (reported: typeof report | null) => hasIdleSlot({ inflight: 5, reported });
  assert.equal(idle(null), false, 'unknown without a report');
  assert.equal(
    hasIdleSlot({ inflight: 5, reported: { ...report, maxRunning: null } }),
    false,
    'unknown without max_running_requests',
  );
  assert.equal(idle(report), true);
  assert.equal(idle({ ...report, queued: 1 }), true, 'a request waiting for the next scheduler step');
  assert.equal(idle({ ...report, queued: 2 }), false, 'a queue: it cannot admit (KV cache full)');
  assert.equal(
    idle({ ...report, running: 31, inflightAtScrape: 4 }),
    false,
    '31 running + 1 dispatched since the scrape fill its 32 slots',
  );
});

test('idle batch slots: queued requests that fleetgate has seen end since the report are no queue', () => {
  // Two arrivals between scheduler steps at the scrape (a loaded machine), one of them this replica's;
  // it has been answered since, so at most one can still wait.
  const stale = { running: 0, queued: 2, tokenUsage: 0, maxRunning: 8, inflightAtScrape: 1 };
  assert.equal(hasIdleSlot({ inflight: 0, reported: stale }), true, 'one of the two ended: one arrival left');
  assert.equal(hasIdleSlot({ inflight: 1, reported: stale }), false, 'nothing ended since: still a queue of two');
  assert.equal(hasIdleSlot({ inflight: 0, reported: stale }, 3), true, 'with replicas too');
});
