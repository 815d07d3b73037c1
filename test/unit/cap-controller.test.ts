import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FleetRegistry } from '../../src/fleet/registry.js';
import { UNREAD_CAP } from '../../src/routing/load/adaptive-cap.js';
import { QUEUE_ALLOWANCE } from '../../src/routing/load/backend-load.js';
import { CapController } from '../../src/routing/load/cap-controller.js';

const OK = { ok: true, reachable: true, reason: null };
const FAIL = { ok: false, reachable: false, reason: 'connection refused' };
const load = { running: 3, queued: 0, tokenUsage: 0.05, maxRunning: 32 };

function setup(scraping = true, slowStart = false) {
  const registry = new FleetRegistry({ rise: 1, fall: 1, stallAfter: 60_000, defaultCap: 0 });
  const early = registry.add({ url: 'http://127.0.0.1:1', name: 'early', kind: 'sglang', log: null });
  new CapController({ registry, scraping, slowStart });
  const late = registry.add({ url: 'http://127.0.0.1:2', name: 'late', kind: 'sglang', log: null });
  return { registry, early, late };
}

test('a backend not read yet holds UNREAD_CAP, whether added before or after the controller', () => {
  const { early, late } = setup();
  assert.equal(early.cap, UNREAD_CAP);
  assert.equal(late.cap, UNREAD_CAP);
});

test('the first report sets the cap from what the backend can run; a later one follows it', () => {
  const { registry, late } = setup();
  registry.reportLoad(late, load);
  assert.equal(late.cap, 32 + QUEUE_ALLOWANCE, 'max_running_requests + the allowance');
  registry.reportLoad(late, { ...load, queued: 5, tokenUsage: 0.5 });
  registry.reportLoad(late, { ...load, running: 10, queued: 6, tokenUsage: 0.5 });
  assert.equal(late.cap, Math.max(1, 0 - 6 + QUEUE_ALLOWANCE), 'queueing at two reports in a row closes it');
});

test('a first read that finds no figures lifts the cap; a backend leaving ready is unread again', () => {
  const { registry, late } = setup();
  registry.reportLoad(late, null);
  assert.equal(late.cap, 0, 'routed uncapped, by in-flight counts');
  registry.apply(late, { type: 'probe', result: OK });
  registry.reportLoad(late, load);
  assert.equal(late.cap, 32 + QUEUE_ALLOWANCE);
  registry.apply(late, { type: 'probe', result: FAIL });
  assert.equal(late.cap, UNREAD_CAP, 'a restarted backend learns its capacity afresh');
  assert.equal(late.reported, null, 'and its old report is gone');
});

test('without scraping nothing would read a backend: caps stay off', () => {
  const { registry, late } = setup(false);
  assert.equal(late.cap, 0);
  registry.apply(late, { type: 'probe', result: OK });
  registry.apply(late, { type: 'probe', result: FAIL });
  assert.equal(late.cap, 0);
});

test('cap_slow_start: a backend starts low and doubles while it does not queue; its first queue ends the doubling', () => {
  const { registry, late } = setup(true, true);
  registry.reportLoad(late, { ...load, running: 0 });
  assert.equal(late.cap, QUEUE_ALLOWANCE, 'what it runs (0) plus the allowance');
  /** fleetgate holds `cap` requests on it (the cap was reached) and it runs them all. */
  const reached = (cap: number, over: Partial<typeof load> = {}) => {
    while (late.inflight < cap) registry.take(late);
    registry.reportLoad(late, { ...load, running: cap, ...over });
  };
  reached(2);
  assert.equal(late.cap, 4);
  reached(4);
  assert.equal(late.cap, 8);
  reached(8, { queued: QUEUE_ALLOWANCE });
  assert.equal(late.cap, 8, 'a queue seen once holds the cap');
  reached(8);
  assert.equal(late.cap, 10, 'after a queue it opens by a quarter, no longer doubling');
});

test('stop(): the controller leaves the registry; reports, transitions and new backends no longer set caps', () => {
  const registry = new FleetRegistry({ rise: 1, fall: 1, stallAfter: 60_000, defaultCap: 0 });
  const gpu = registry.add({ url: 'http://127.0.0.1:1', name: 'gpu', kind: 'sglang', log: null });
  const caps = new CapController({ registry, scraping: true });
  registry.apply(gpu, { type: 'probe', result: OK });
  registry.reportLoad(gpu, load);
  assert.equal(gpu.cap, 32 + QUEUE_ALLOWANCE, 'running: it follows the reports');
  const listeners = ['added', 'transition', 'load'].map((event) => registry.listenerCount(event));
  caps.stop();
  assert.deepEqual(
    ['added', 'transition', 'load'].map((event) => registry.listenerCount(event)),
    listeners.map((n) => n - 1),
    'one listener fewer on each event',
  );
  registry.reportLoad(gpu, { ...load, running: 10, queued: 6, tokenUsage: 0.5 });
  registry.reportLoad(gpu, { ...load, running: 10, queued: 6, tokenUsage: 0.5 });
  assert.equal(gpu.cap, 32 + QUEUE_ALLOWANCE, 'a queueing report no longer closes it');
  registry.apply(gpu, { type: 'probe', result: FAIL });
  assert.equal(gpu.cap, 32 + QUEUE_ALLOWANCE, 'leaving ready no longer marks it unread');
  const late = registry.add({ url: 'http://127.0.0.1:2', name: 'late', kind: 'sglang', log: null });
  assert.equal(late.cap, 0, 'a new backend is not held at UNREAD_CAP');
});
