import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FleetRegistry } from '../../src/fleet/registry.js';
import { UNREAD_CAP } from '../../src/routing/adaptive-cap.js';
import { QUEUE_ALLOWANCE } from '../../src/routing/backend-load.js';
import { CapController } from '../../src/routing/cap-controller.js';

const OK = { ok: true, reachable: true, reason: null };
const FAIL = { ok: false, reachable: false, reason: 'connection refused' };
const load = { running: 3, queued: 0, tokenUsage: 0.05, maxRunning: 32 };

function setup(scraping = true) {
  const registry = new FleetRegistry({ rise: 1, fall: 1, stallAfter: 60_000, defaultCap: 0 });
  const early = registry.add({ url: 'http://127.0.0.1:1', name: 'early', kind: 'sglang', log: null });
  new CapController({ registry, scraping });
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
