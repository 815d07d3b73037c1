/**
 * The log tells the lifecycle what /health cannot: a server dying during CUDA graph capture is
 * `failed` with the log's reason at once, a hung capture is `stalled`, a restart leaves `failed`,
 * and a scheduler exception after ready fails a backend whose /health still answers 200.
 * Default log poll interval (250 ms), as in production.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { request } from 'undici';
import { SimServer } from '../../src/sim/index.js';
import { backendsFor, createSims, startGateway, stateOf } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

async function logDir(t: { after(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'fleetgate-logs-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

const slowCapture = { shards: 3, shardMs: 20, graphBatches: 10, graphBatchMs: 40, warmupMs: 50 };

test('CUDA OOM during graph capture: failed with that reason within 1 s; restart leaves failed and admits', async (t) => {
  const dir = await logDir(t);
  const [sim] = await createSims(t, [
    { logFile: join(dir, 'gpu0.log'), timing: slowCapture, failure: { mode: 'cuda_oom_capture', atBatch: 5 } },
  ]);
  const { gateway } = await startGateway(t, {
    backends: backendsFor([sim], (s) => ({ log: s.options.logFile })),
    health: { starting_interval: '200ms' },
  });
  const exited = new Promise<number>((resolve) => sim.once('exit', () => resolve(performance.now())));
  sim.start();
  // On a busy machine the first log poll may come after the crash line: then it goes straight to failed.
  await waitFor(() => ['starting', 'failed'].includes(stateOf(gateway, sim.name) ?? ''), {
    what: 'starting from the log',
  });
  const exitAt = await exited;
  await waitFor(() => stateOf(gateway, sim.name) === 'failed', { timeoutMs: 1_000, intervalMs: 5, what: 'failed' });
  const failedAfter = performance.now() - exitAt;
  assert.ok(failedAfter < 1_000, `failed ${failedAfter.toFixed(0)} ms after the line`);
  const snapshot = gateway.fleet.registry.get(sim.name)?.lifecycle.snapshot;
  assert.match(snapshot?.reason ?? '', /Scheduler hit an exception: .*CUDA out of memory/);

  // Still failed while the port stays closed; a restart (fresh log) makes it start again and join.
  await waitFor(() => gateway.fleet.registry.get(sim.name)?.lifecycle.snapshot.reason !== null, {
    what: 'reason kept',
  });
  await sim.restart({ failure: null });
  await waitFor(() => stateOf(gateway, sim.name) === 'starting', { timeoutMs: 2_000, what: 'starting afresh' });
  await waitFor(() => stateOf(gateway, sim.name) === 'ready', { timeoutMs: 5_000, what: 'admitted after restart' });
});

test('a capture that hangs shows reason "stalled" after stall_after, state stays starting', async (t) => {
  const dir = await logDir(t);
  const [sim] = await createSims(t, [
    { logFile: join(dir, 'gpu0.log'), timing: slowCapture, failure: { mode: 'hang_capture', atBatch: 3 } },
  ]);
  const { gateway } = await startGateway(t, {
    backends: backendsFor([sim], (s) => ({ log: s.options.logFile })),
    health: { stall_after: '600ms', starting_interval: '200ms' },
  });
  sim.start();
  await waitFor(() => gateway.fleet.registry.get(sim.name)?.lifecycle.snapshot.phase === 'capturing_cuda_graphs', {
    what: 'capturing',
  });
  const snapshot = () => gateway.fleet.registry.get(sim.name)?.lifecycle.snapshot;
  assert.equal(snapshot()?.reason, null, 'not stalled while making progress');
  await waitFor(() => snapshot()?.reason === 'stalled', { timeoutMs: 4_000, what: 'stalled' });
  assert.equal(snapshot()?.state, 'starting');
  assert.equal(snapshot()?.phase, 'capturing_cuda_graphs');
});

test('scheduler exception after ready fails the backend although /health still answers 200', async (t) => {
  const dir = await logDir(t);
  const [sim] = await createSims(t, [
    {
      logFile: join(dir, 'gpu0.log'),
      version: 'old',
      timing: slowCapture,
      failure: { mode: 'scheduler_dead_http_alive', afterMs: 300 },
    },
  ]);
  const { gateway } = await startGateway(t, {
    backends: backendsFor([sim], (s) => ({ log: s.options.logFile })),
    health: { starting_interval: '100ms', interval: '100ms' },
  });
  sim.start();
  await waitFor(() => stateOf(gateway, sim.name) === 'ready', { timeoutMs: 5_000, what: 'ready' });
  await waitFor(() => stateOf(gateway, sim.name) === 'failed', { timeoutMs: 3_000, what: 'failed' });
  const health = await request(`${sim.url}/health`);
  await health.body.text();
  assert.equal(health.statusCode, 200, 'the server itself still claims to be healthy');
  assert.match(gateway.fleet.registry.get(sim.name)?.lifecycle.snapshot.reason ?? '', /Scheduler hit an exception/);
  // Probes keep passing, but the backend stays out.
  const probesBefore = sim.counters.byPath['/health'] ?? 0;
  await waitFor(() => (sim.counters.byPath['/health'] ?? 0) > probesBefore + 2, { what: 'more probes' });
  assert.equal(stateOf(gateway, sim.name), 'failed');
});

test('old SGLang (200 on /health during warm-up) is admitted only after the ready line', async (t) => {
  const dir = await logDir(t);
  const [sim] = await createSims(t, [
    { logFile: join(dir, 'gpu0.log'), version: 'old', timing: { ...slowCapture, warmupMs: 800 } },
  ]);
  const { gateway } = await startGateway(t, {
    backends: backendsFor([sim], (s) => ({ log: s.options.logFile })),
    health: { starting_interval: '50ms' },
  });
  let healthWasOkWhileWarming = false;
  sim.on('status', (status: string) => {
    if (status === 'warming_up') {
      void request(`${sim.url}/health`).then(async (res) => {
        await res.body.text();
        healthWasOkWhileWarming = res.statusCode === 200;
      });
    }
  });
  let readyBeforeLine = false;
  gateway.fleet.registry.on('transition', ({ to }) => {
    if (to === 'ready' && sim.status !== 'ready') readyBeforeLine = true;
  });
  sim.start();
  await waitFor(() => stateOf(gateway, sim.name) === 'ready', { timeoutMs: 5_000, what: 'ready' });
  assert.ok(healthWasOkWhileWarming, 'old SGLang answered 200 during warm-up');
  assert.equal(readyBeforeLine, false, 'admitted only after "fired up and ready to roll"');
  assert.equal(sim.counters.requestsWhileNotReady, 0);
});

test('a stale old server on the port: the new one cannot bind, fails with that reason, and the old one gets no traffic', async (t) => {
  const dir = await logDir(t);
  const [stale] = await createSims(t, [{ timing: slowCapture }]);
  stale.start();
  await stale.whenReady();
  // The new launch on the same port, logging where fleetgate looks.
  const fresh = new SimServer({ port: stale.port, name: 'gpu0', logFile: join(dir, 'gpu0.log'), timing: slowCapture });
  t.after(() => fresh.stop());
  const { gateway, url } = await startGateway(t, {
    backends: [{ url: stale.url, name: 'gpu0', log: fresh.options.logFile }],
    health: { starting_interval: '100ms' },
    queue: { timeout: '300ms' },
  });
  fresh.start();
  await waitFor(() => stateOf(gateway, 'gpu0') === 'failed', { timeoutMs: 10_000, what: 'failed from the log' });
  const reason = gateway.fleet.registry.get('gpu0')?.lifecycle.snapshot.reason ?? '';
  assert.match(reason, /address already in use/);
  const before = stale.counters.requests;
  const res = await request(`${url}/generate`, { method: 'POST', body: JSON.stringify({ text: 'hi' }) });
  await res.body.text();
  assert.equal(res.statusCode, 503, 'nothing ready: the stale server answering on the port is not admitted');
  assert.equal(stale.counters.requests, before, 'no request reached the stale server');
});
