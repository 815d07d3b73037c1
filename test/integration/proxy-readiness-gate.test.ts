/**
 * The heart of the mission: 7 backends start at different times under continuous client load. No
 * generation request may reach a backend that is not ready (counted at the backends, including
 * during SGLang's warm-up when SGLang itself would answer), and each backend gets its first request
 * soon after its /health turns 200.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { request } from 'undici';
import { INFO_PATHS } from '../../src/sim/index.js';
import { backendsFor, createSims, startGateway } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

test('7 staggered backends under load: none gets a request before ready, each soon after', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'fleetgate-gate-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const sims = await createSims(
    t,
    Array.from({ length: 7 }, (_, i) => ({
      logFile: join(dir, `sglang_gpu${i}.log`),
      // Staggered: each backend starts 150 ms after the previous; warm-up long enough that requests
      // arriving during it would be noticed (SGLang serves generation during warm-up).
      timing: {
        startDelayMs: i * 150,
        shards: 4,
        shardMs: 10,
        graphBatches: 4,
        graphBatchMs: 10,
        warmupMs: 300,
        healthMs: 5,
      },
      engine: { tokenMs: 1 },
    })),
  );
  const { url } = await startGateway(t, {
    backends: backendsFor(sims, (sim) => ({ log: sim.options.logFile })),
    health: { starting_interval: '1s', interval: '2s' },
    queue: { timeout: '30s' },
  });

  const healthyAt = new Map<string, number>();
  const firstRequestAt = new Map<string, number>();
  for (const sim of sims) {
    sim.on('ready', () => healthyAt.set(sim.name, performance.now()));
    sim.on('request', ({ path }: { path: string }) => {
      if (INFO_PATHS.has(path)) return;
      if (!firstRequestAt.has(sim.name)) firstRequestAt.set(sim.name, performance.now());
    });
  }

  // Continuous load from the start, before anything is ready: a generation script started at once.
  let stop = false;
  const statuses: number[] = [];
  const client = async () => {
    while (!stop) {
      const res = await request(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
      });
      await res.body.text();
      statuses.push(res.statusCode);
    }
  };
  const clients = Array.from({ length: 6 }, client);
  for (const sim of sims) sim.start();

  await waitFor(() => firstRequestAt.size === 7, { timeoutMs: 20_000, what: 'every backend to get traffic' });
  stop = true;
  await Promise.all(clients);

  for (const sim of sims) {
    assert.equal(sim.counters.requestsWhileNotReady, 0, `${sim.name} got a request before it was ready`);
    const delay = (firstRequestAt.get(sim.name) ?? 0) - (healthyAt.get(sim.name) ?? 0);
    assert.ok(delay >= 0, `${sim.name}: traffic before /health turned 200`);
    assert.ok(delay < 1_500, `${sim.name}: first request ${delay.toFixed(0)} ms after ready`);
  }
  assert.ok(statuses.length > 20, `the load ran (${statuses.length} requests)`);
  assert.deepEqual([...new Set(statuses)], [200], 'every client request succeeded');
});
