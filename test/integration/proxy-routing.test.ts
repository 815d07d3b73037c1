/** Least-loaded routing against real backends: slow ones get less, caps hold, the wrong model never gets in. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import type { SimServer } from '../../src/sim/index.js';
import { backendsFor, createSims, startGateway, startReadyFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

const generate = JSON.stringify({ text: 'hello', sampling_params: { max_new_tokens: 12 } });

async function load(url: string, clients: number, perClient: number): Promise<number[]> {
  const statuses: number[] = [];
  await Promise.all(
    Array.from({ length: clients }, async () => {
      for (let i = 0; i < perClient; i++) {
        const res = await request(`${url}/generate`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: generate,
        });
        await res.body.text();
        statuses.push(res.statusCode);
      }
    }),
  );
  return statuses;
}

/** In flight at the backend itself: received minus answered minus aborted. */
const atBackend = (sim: SimServer) => sim.counters.requests - sim.counters.completed - sim.counters.aborted;

test('least-loaded: a backend 3x slower gets markedly fewer requests', async (t) => {
  const { url, sims } = await startReadyFleet(t, [
    { engine: { tokenMs: 3 } },
    { engine: { tokenMs: 3 } },
    { engine: { tokenMs: 3, slowdown: 3 } },
  ]);

  const statuses = await load(url, 12, 25);
  assert.deepEqual([...new Set(statuses)], [200]);
  const [a, b, slow] = sims.map((s) => s.counters.requests);
  assert.equal(a + b + slow, 300);
  assert.ok(slow < 0.6 * ((a + b) / 2), `slow backend got ${slow}, the others ${a} and ${b}`);
});

test('round-robin, by contrast, gives the slow backend its full share', async (t) => {
  const { url, sims } = await startReadyFleet(
    t,
    [{ engine: { tokenMs: 3 } }, { engine: { tokenMs: 3 } }, { engine: { tokenMs: 3, slowdown: 3 } }],
    { routing: { policy: 'round-robin' } },
  );
  await load(url, 12, 10);
  const counts = sims.map((s) => s.counters.requests);
  assert.ok(Math.max(...counts) - Math.min(...counts) <= 1, String(counts));
});

test('max_inflight_per_backend: no backend ever holds more than the cap; the rest wait in fleetgate', async (t) => {
  const { url, gateway, sims } = await startReadyFleet(
    t,
    [{ engine: { tokenMs: 4 } }, { engine: { tokenMs: 4 } }, { engine: { tokenMs: 4 } }],
    { routing: { max_inflight_per_backend: 2 } },
  );

  let peak = 0;
  let peakQueue = 0;
  let sampling = true;
  const sample = () => {
    for (const sim of sims) peak = Math.max(peak, atBackend(sim));
    peakQueue = Math.max(peakQueue, gateway.queue.waiting);
    if (sampling) setImmediate(sample);
  };
  sample();
  const statuses = await load(url, 20, 8);
  sampling = false;
  assert.deepEqual([...new Set(statuses)], [200]);
  assert.equal(peak, 2, `peak in flight at one backend: ${peak}`);
  assert.ok(peakQueue > 0, 'requests waited in fleetgate');
});

test('expect_model: a stale instance serving another model is never admitted', async (t) => {
  const sims = await createSims(t, [{ model: 'org/new-model' }, { model: 'org/old-model' }]);
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((s) => s.whenReady()));
  const { url, gateway } = await startGateway(t, {
    backends: backendsFor(sims),
    expect_model: 'org/new-model',
    health: { starting_interval: '50ms' },
  });
  await waitFor(() => gateway.fleet.registry.ready.length === 1, { what: 'the right one ready' });
  await load(url, 4, 10);
  const stale = gateway.fleet.registry.get(sims[1].name);
  assert.equal(sims[1].counters.requests, 0, 'the stale instance got no traffic');
  assert.equal(sims[0].counters.requests, 40);
  assert.notEqual(stale?.state, 'ready');
  assert.match(stale?.lifecycle.snapshot.reason ?? '', /serves model "org\/old-model", expected "org\/new-model"/);
});

test('max_inflight_per_backend: auto caps each backend at its reported max_running_requests', async (t) => {
  const sims = await createSims(t, [
    { engine: { tokenMs: 4, maxRunningRequests: 3 } },
    { engine: { tokenMs: 4, maxRunningRequests: 5 } },
  ]);
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((s) => s.whenReady()));
  const { url, gateway } = await startGateway(t, {
    backends: backendsFor(sims),
    routing: { max_inflight_per_backend: 'auto', load_interval: '50ms' },
  });
  await waitFor(() => sims.every((s) => gateway.fleet.registry.get(s.name)?.cap !== 0), { what: 'caps learned' });
  assert.deepEqual(
    sims.map((s) => gateway.fleet.registry.get(s.name)?.cap),
    [3, 5],
  );
  const peaks = [0, 0];
  let sampling = true;
  const sample = () => {
    sims.forEach((sim, i) => {
      peaks[i] = Math.max(peaks[i], atBackend(sim));
    });
    if (sampling) setImmediate(sample);
  };
  sample();
  const statuses = await load(url, 16, 6);
  sampling = false;
  assert.deepEqual([...new Set(statuses)], [200]);
  assert.deepEqual(peaks, [3, 5], 'each backend filled to exactly its own limit, never beyond');
});
