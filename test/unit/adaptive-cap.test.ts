import assert from 'node:assert/strict';
import { test } from 'node:test';
import { KV_FULL, KV_NEARLY_EMPTY, nextAdaptiveCap } from '../../src/routing/load/adaptive-cap.js';
import { QUEUE_ALLOWANCE } from '../../src/routing/load/backend-load.js';

const report = (over: Partial<Parameters<typeof nextAdaptiveCap>[0]> = {}) => ({
  running: 10,
  queued: 0,
  tokenUsage: 0.5,
  maxRunning: 32,
  queuedBefore: 0,
  ...over,
});
/** A report whose queue was there at the previous report too. */
const queueing = (over: Partial<Parameters<typeof nextAdaptiveCap>[0]> & { queued: number }) =>
  report({ queuedBefore: over.queued, ...over });

test('first report: the cap starts at max_running_requests plus the queue allowance', () => {
  assert.equal(nextAdaptiveCap(report(), 0, 0), 32 + QUEUE_ALLOWANCE);
});

test('first report without a reported max_running_requests: no cap until the backend queues', () => {
  assert.equal(nextAdaptiveCap(report({ maxRunning: null }), 0, 0), 0);
  assert.equal(nextAdaptiveCap(queueing({ maxRunning: null, running: 7, queued: 5 }), 0, 12), 7 + QUEUE_ALLOWANCE);
});

test('a backend that queues at two reports in a row closes to what it runs plus the allowance', () => {
  assert.equal(nextAdaptiveCap(queueing({ running: 12, queued: 20 }), 34, 32), 12 + QUEUE_ALLOWANCE);
  assert.equal(nextAdaptiveCap(queueing({ running: 12, queued: QUEUE_ALLOWANCE }), 34, 14), 12 + QUEUE_ALLOWANCE);
});

test('a queue seen once holds the cap: a burst of arrivals the scheduler has not admitted yet', () => {
  // A batch job's first 34 requests reach an idle backend between two scheduler steps.
  assert.equal(nextAdaptiveCap(report({ running: 0, queued: 34, queuedBefore: 0 }), 34, 34), 34);
  assert.equal(nextAdaptiveCap(report({ running: 0, queued: 34, queuedBefore: null }), 34, 34), 34, 'first report');
  assert.equal(nextAdaptiveCap(report({ running: 12, queued: 3, queuedBefore: 1 }), 12, 15), 12, 'nor does it open');
  // At the next report the burst is running; a KV-bound backend still queues and closes.
  assert.equal(nextAdaptiveCap(report({ running: 34, queued: 0, queuedBefore: 34 }), 34, 34), 34);
  assert.equal(nextAdaptiveCap(report({ running: 9, queued: 25, queuedBefore: 34 }), 34, 34), 9 + QUEUE_ALLOWANCE);
});

test('a queue at a backend with free slots and a nearly empty KV cache is admission lag: the cap holds', () => {
  // Thousands of small requests per second on a backend that may run 8192: a few always wait for the next step.
  const lag = { running: 40, queued: 12, maxRunning: 8192, tokenUsage: 0.001 };
  assert.equal(nextAdaptiveCap(queueing(lag), 8194, 52), 8194);
  // The same queue with the batch slots used up, or KV filling (admission by reservation), closes it.
  assert.equal(nextAdaptiveCap(queueing({ ...lag, maxRunning: 41 }), 43, 52), 40 + QUEUE_ALLOWANCE);
  assert.equal(nextAdaptiveCap(queueing({ ...lag, tokenUsage: KV_NEARLY_EMPTY }), 8194, 52), 40 + QUEUE_ALLOWANCE);
  // Without a reported max_running_requests or KV usage fleetgate cannot tell: a queue closes it.
  assert.equal(nextAdaptiveCap(queueing({ ...lag, maxRunning: null }), 60, 52), 40 + QUEUE_ALLOWANCE);
  assert.equal(nextAdaptiveCap(queueing({ ...lag, tokenUsage: null }), 8194, 52), 40 + QUEUE_ALLOWANCE);
});

test("several fleetgate replicas: each gives back the queue it sees, not the others' requests", () => {
  // The backend runs 30 and queues 10; this replica has 20 of the 40 requests on it.
  assert.equal(nextAdaptiveCap(queueing({ running: 30, queued: 10 }), 34, 20), 20 - 10 + QUEUE_ALLOWANCE);
});

test('a nearly full KV cache counts as full even before anything queues', () => {
  assert.equal(nextAdaptiveCap(report({ running: 9, tokenUsage: KV_FULL }), 20, 9), 9 + QUEUE_ALLOWANCE);
  assert.equal(nextAdaptiveCap(report({ running: 9, tokenUsage: KV_FULL - 0.01 }), 20, 20), 25);
});

test('a cap that held requests back opens by a quarter while the backend has room, up to its limit', () => {
  assert.equal(nextAdaptiveCap(report({ running: 12 }), 12, 12), 15);
  assert.equal(nextAdaptiveCap(report({ running: 2 }), 2, 2), 3, 'at least one more');
  assert.equal(nextAdaptiveCap(report({ running: 30 }), 32, 32), 32 + QUEUE_ALLOWANCE, 'never past the limit');
});

test('an idle backend keeps its cap: only a binding cap learns something', () => {
  assert.equal(nextAdaptiveCap(report({ running: 3 }), 12, 3), 12);
});

test('the cap never closes below one request', () => {
  assert.equal(nextAdaptiveCap(queueing({ running: 0, queued: 4, maxRunning: 32 }), 10, 4), QUEUE_ALLOWANCE);
  assert.ok(nextAdaptiveCap(queueing({ running: 0, queued: 4, maxRunning: 0 }), 10, 4) >= 1);
});

test('slow start: a first report starts the cap at what the backend runs plus the allowance, then it doubles', () => {
  assert.equal(nextAdaptiveCap(report({ running: 0 }), 0, 0, true), QUEUE_ALLOWANCE);
  assert.equal(nextAdaptiveCap(report({ running: 5 }), 0, 5, true), 5 + QUEUE_ALLOWANCE);
  assert.equal(nextAdaptiveCap(report({ running: 4 }), 4, 4, true), 8, 'doubles when reached');
  assert.equal(nextAdaptiveCap(report({ running: 3 }), 4, 3, true), 4, 'not reached: holds');
  assert.equal(nextAdaptiveCap(report({ running: 30 }), 32, 32, true), 32 + QUEUE_ALLOWANCE, 'never past the limit');
});
