/** No backend ready: requests are held (bounded), served once one is ready, or answered 503. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import type { RequestRecord } from '../../src/proxy/proxy-events.js';
import { backendsFor, createSims, startGateway } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

const body = JSON.stringify({ text: 'hi', sampling_params: { max_new_tokens: 3 } });
const post = (url: string, signal?: AbortSignal) =>
  request(`${url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal });

test('a held request is served as soon as a backend turns ready', async (t) => {
  const [sim] = await createSims(t, [{ timing: { warmupMs: 50 } }]);
  const { url, gateway } = await startGateway(t, {
    backends: backendsFor([sim]),
    health: { starting_interval: '50ms' },
    queue: { timeout: '20s' },
  });
  const records: RequestRecord[] = [];
  gateway.events.on('request', (record) => records.push(record));
  const pending = post(url);
  await waitFor(() => gateway.queue.waiting === 1, { what: 'the request to wait' });
  const waitingSeen = performance.now();
  assert.equal(sim.counters.requests, 0);
  const startedAt = performance.now();
  sim.start();
  const res = await pending;
  assert.equal(res.statusCode, 200);
  assert.match(await res.body.text(), /"text"/);
  assert.equal(sim.counters.requestsWhileNotReady, 0);
  // The record's queue time (the access log's queue_ms) covers the hold: it arrived before it was
  // seen waiting and left the queue only once the backend, started after that, was ready (its
  // warm-up of 50 ms takes at least half that).
  await waitFor(() => records.length === 1, { what: 'the request record' });
  const { queueMs, durationMs } = records[0];
  assert.ok(queueMs !== null && queueMs >= startedAt - waitingSeen + 25, `queue time ${queueMs} ms`);
  assert.ok(queueMs <= durationMs, `queue time ${queueMs} within the request's ${durationMs} ms`);
});

test('queue timeout: 503 with Retry-After and an OpenAI-style error', async (t) => {
  const [sim] = await createSims(t, [{}]);
  const { url } = await startGateway(t, { backends: backendsFor([sim]), queue: { timeout: '150ms' } });
  const started = performance.now();
  const res = await post(url);
  const elapsed = performance.now() - started;
  assert.equal(res.statusCode, 503);
  assert.ok(Number(res.headers['retry-after']) >= 1);
  const error = (await res.body.json()) as { error: { message: string; type: string; code: number } };
  assert.equal(error.error.type, 'fleet_unavailable');
  assert.equal(error.error.code, 503);
  assert.match(error.error.message, /no backend/);
  assert.ok(elapsed >= 140, `held for the queue timeout (${elapsed.toFixed(0)} ms)`);
});

test('shutdown answers a held request at once: 503, connection closed, counted', async (t) => {
  const [sim] = await createSims(t, [{}]);
  const { url, gateway } = await startGateway(t, { backends: backendsFor([sim]), queue: { timeout: '20s' } });
  const pending = post(url);
  await waitFor(() => gateway.queue.waiting === 1, { what: 'the request to wait' });
  const closed = gateway.close();
  const res = await pending;
  assert.equal(res.statusCode, 503);
  assert.equal(res.headers.connection, 'close');
  const error = (await res.body.json()) as { error: { message: string; type: string } };
  assert.deepEqual(error.error.type, 'fleet_unavailable');
  assert.match(error.error.message, /shutting down/);
  await closed;
  assert.equal(gateway.queue.rejected.shutdown, 1);
  assert.equal(sim.counters.requests, 0);
});

test('a full queue answers 503 at once', async (t) => {
  const [sim] = await createSims(t, [{}]);
  const { url, gateway } = await startGateway(t, {
    backends: backendsFor([sim]),
    queue: { timeout: '20s', max_waiting: 1 },
  });
  const controller = new AbortController();
  const held = post(url, controller.signal).catch(() => null);
  await waitFor(() => gateway.queue.waiting === 1, { what: 'one waiting' });
  const res = await post(url);
  assert.equal(res.statusCode, 503);
  assert.equal(((await res.body.json()) as { error: { type: string } }).error.type, 'fleet_unavailable');
  controller.abort();
  await held;
});

test('a held client that disconnects leaves the queue and never reaches a backend', async (t) => {
  const [sim] = await createSims(t, [{ timing: { warmupMs: 20 } }]);
  const { url, gateway } = await startGateway(t, {
    backends: backendsFor([sim]),
    health: { starting_interval: '50ms' },
    queue: { timeout: '20s' },
  });
  const controller = new AbortController();
  const held = post(url, controller.signal).catch((error: Error) => error);
  await waitFor(() => gateway.queue.waiting === 1, { what: 'the request to wait' });
  controller.abort();
  await held;
  await waitFor(() => gateway.queue.waiting === 0, { timeoutMs: 2_000, what: 'the queue to empty' });
  sim.start();
  await waitFor(() => gateway.fleet.registry.ready.length === 1, { what: 'ready' });
  const res = await post(url);
  assert.equal(res.statusCode, 200);
  await res.body.text();
  assert.equal(sim.counters.requests, 1, 'only the live request reached the backend');
});
