/** Least-loaded routing against real backends: slow ones get less, caps hold, the wrong model never gets in. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { QUEUE_ALLOWANCE } from '../../src/routing/load/backend-load.js';
import type { SimServer } from '../../src/sim/index.js';
import { backendsFor, createSims, startGateway, startReadyFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

const generate = JSON.stringify({ text: 'hello', sampling_params: { max_new_tokens: 12 } });

interface LoopOptions {
  /** Asked before each request: false ends this client's loop. */
  more?: (client: number) => boolean;
  body?: (client: number, i: number) => string;
}

/** `clients` closed loops of `/generate`, each at most `perClient` requests; the statuses. */
async function load(url: string, clients: number, perClient: number, opts: LoopOptions = {}): Promise<number[]> {
  const statuses: number[] = [];
  await Promise.all(
    Array.from({ length: clients }, async (_, client) => {
      for (let i = 0; i < perClient && (opts.more?.(client) ?? true); i++) {
        const res = await request(`${url}/generate`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: opts.body?.(client, i) ?? generate,
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
  // 6 ms a token: at 3 ms the step time of a busy 2-core machine's timers blurred the 3x.
  const { url, sims } = await startReadyFleet(t, [
    { engine: { tokenMs: 6 } },
    { engine: { tokenMs: 6 } },
    { engine: { tokenMs: 6, slowdown: 3 } },
  ]);

  const statuses = await load(url, 12, 25);
  assert.deepEqual([...new Set(statuses)], [200]);
  const [a, b, slow] = sims.map((s) => s.counters.requests);
  assert.equal(a + b + slow, 300);
  t.diagnostic(`requests: ${a} / ${b} / slow ${slow}`);
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

test('max_inflight_per_backend: auto starts each cap at max_running_requests plus the queue allowance', async (t) => {
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
  const capOf = (sim: SimServer) => gateway.fleet.registry.get(sim.name)?.cap;
  await waitFor(() => sims.every((s) => gateway.fleet.registry.get(s.name)?.reported), { what: 'caps learned' });
  assert.deepEqual(sims.map(capOf), [3 + QUEUE_ALLOWANCE, 5 + QUEUE_ALLOWANCE]);
  const status = (await (await request(`${url}/fleet/status`)).body.json()) as { backends: { inflight_cap: number }[] };
  assert.deepEqual(
    status.backends.map((b) => b.inflight_cap),
    [3 + QUEUE_ALLOWANCE, 5 + QUEUE_ALLOWANCE],
    '/fleet/status shows each cap',
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
  const statuses = await load(url, 24, 6);
  sampling = false;
  assert.deepEqual([...new Set(statuses)], [200]);
  sims.forEach((sim, i) => {
    assert.ok(peaks[i] <= (capOf(sim) ?? 0), `${sim.name} held ${peaks[i]}, beyond its cap ${capOf(sim)}`);
  });
});

test('max_inflight_per_backend: auto closes the cap of a backend whose KV cache is full; the rest wait in fleetgate', async (t) => {
  // Each request reserves ~30 KV tokens on admission: the 40-token pool runs one at a time.
  const engine = { tokenMs: 5, maxRunningRequests: 16 };
  const sims = await createSims(t, [
    { engine: { ...engine, maxTotalNumTokens: 40 } },
    { engine: { ...engine, maxTotalNumTokens: 100_000 } },
  ]);
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((s) => s.whenReady()));
  const { url, gateway } = await startGateway(t, {
    backends: backendsFor(sims),
    routing: { max_inflight_per_backend: 'auto', load_interval: '50ms' },
  });
  const [full, roomy] = sims.map((sim) => gateway.fleet.registry.get(sim.name));
  await waitFor(() => full?.reported && roomy?.reported, { what: 'caps learned' });
  const body = JSON.stringify({ text: 'hello', sampling_params: { max_new_tokens: 40 } });
  // It runs one; the cap adds the allowance, and counts an answer that may be on its way back at the scrape.
  const closedCap = 1 + QUEUE_ALLOWANCE + 1;
  let peakAfterClose = 0;
  // A burst that arrives between two engine steps reads as a queue and may dip the roomy cap for a
  // few reports; what matters is that it is open while the full one is closed.
  let roomyCapAfterClose = 0;
  let closed = false;
  let sampling = true;
  const sample = () => {
    // Once the cap has closed and what was sent before has drained, the backend never holds more.
    if (!closed && (full?.cap ?? 0) <= closedCap && atBackend(sims[0]) <= (full?.cap ?? 0)) closed = true;
    if (closed) {
      peakAfterClose = Math.max(peakAfterClose, atBackend(sims[0]));
      roomyCapAfterClose = Math.max(roomyCapAfterClose, roomy?.cap ?? 0);
    }
    if (sampling) setImmediate(sample);
  };
  sample();
  // Load goes on until each client sent 8 requests after the cap closed, so the closed cap is seen under load.
  const afterClose = new Array<number>(24).fill(0);
  const statuses = await load(url, 24, 60, {
    more: (client) => {
      if (closed) afterClose[client]++;
      return afterClose[client] <= 8;
    },
    body: () => body,
  });
  sampling = false;
  assert.deepEqual([...new Set(statuses)], [200]);
  assert.ok(closed, `the full backend's cap closed to what it runs plus ${QUEUE_ALLOWANCE} (cap ${full?.cap})`);
  assert.ok(peakAfterClose <= closedCap, `the full backend then held at most ${closedCap}, saw ${peakAfterClose}`);
  assert.ok(roomyCapAfterClose >= 16, `the roomy backend's cap was open meanwhile (${roomyCapAfterClose})`);
  assert.ok(
    sims[1].counters.completed > 3 * sims[0].counters.completed,
    `the roomy backend served most (${sims[1].counters.completed} vs ${sims[0].counters.completed})`,
  );
});

test('max_inflight_per_backend: auto keeps a roomy backend open while arrivals wait for its next step', async (t) => {
  // Long steps and answers of 1-4 tokens: at every step end a few requests finish, and their
  // successors wait in the backend's queue for the next step, so the backend reports a queue at
  // most scrapes while it has 256 slots and an empty KV cache. That is not a full backend.
  const sims = await createSims(t, [
    { engine: { tokenMs: 40, maxRunningRequests: 256, maxTotalNumTokens: 1_000_000 } },
  ]);
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((s) => s.whenReady()));
  const { url, gateway } = await startGateway(t, {
    backends: backendsFor(sims),
    routing: { max_inflight_per_backend: 'auto', load_interval: '50ms' },
  });
  const backend = gateway.fleet.registry.get(sims[0].name);
  await waitFor(() => backend?.reported, { what: 'cap learned' });
  let queueSeenTwice = 0;
  let lowestCap = Number.POSITIVE_INFINITY;
  let peakWaiting = 0;
  let lastReport: unknown = null;
  let queuedBefore = 0;
  let sampling = true;
  const sample = () => {
    const report = backend?.reported ?? null;
    if (report !== null && report !== lastReport) {
      if (report.queued >= QUEUE_ALLOWANCE && queuedBefore >= QUEUE_ALLOWANCE) queueSeenTwice++;
      queuedBefore = report.queued;
      lastReport = report;
    }
    lowestCap = Math.min(lowestCap, backend?.cap ?? 0);
    peakWaiting = Math.max(peakWaiting, gateway.queue.waiting);
    if (sampling) setImmediate(sample);
  };
  sample();
  // Until the backend was seen queueing at two scrapes in a row 5 times (bounded by count).
  const statuses = await load(url, 24, 60, {
    more: () => queueSeenTwice < 5,
    body: (client, i) => JSON.stringify({ text: 'hello', sampling_params: { max_new_tokens: 1 + ((client + i) % 4) } }),
  });
  sampling = false;
  assert.deepEqual([...new Set(statuses)], [200]);
  assert.ok(queueSeenTwice >= 5, `the backend reported a queue at two scrapes in a row (${queueSeenTwice} times)`);
  assert.equal(lowestCap, 256 + QUEUE_ALLOWANCE, 'its cap stayed open');
  assert.equal(peakWaiting, 0, 'no request waited in fleetgate');
});

test('max_inflight_per_backend: auto gives a backend that turns ready while requests wait in fleetgate no more than its cap', async (t) => {
  // gpu0 runs 2 at a time: 16 clients keep ~10 requests waiting in fleetgate when gpu1 turns ready.
  // Uncapped until its first load report, gpu1 used to take every one of them at once.
  const engine = { tokenMs: 5, maxRunningRequests: 2 };
  const sims = await createSims(t, [{ engine }, { engine }]);
  sims[0].start();
  await sims[0].whenReady();
  const { url, gateway } = await startGateway(t, {
    backends: backendsFor(sims),
    health: { starting_interval: '50ms' },
    routing: { max_inflight_per_backend: 'auto', load_interval: '50ms' },
  });
  await waitFor(() => gateway.fleet.registry.get(sims[0].name)?.reported, { what: 'gpu0 read' });
  const late = gateway.fleet.registry.get(sims[1].name);
  let peakLate = 0;
  let sampling = true;
  const sample = () => {
    peakLate = Math.max(peakLate, atBackend(sims[1]));
    if (sampling) setImmediate(sample);
  };
  sample();
  let admitted = false;
  const loading = load(url, 16, 40, {
    more: () => !admitted || (late?.reported ?? null) === null || sims[1].counters.completed < 20,
  });
  await waitFor(() => gateway.queue.waiting >= 8, { what: 'requests waiting in fleetgate' });
  sims[1].start();
  await waitFor(() => late?.state === 'ready', { what: 'gpu1 admitted' });
  admitted = true;
  const statuses = await loading;
  sampling = false;
  assert.deepEqual([...new Set(statuses)], [200]);
  assert.ok(sims[1].counters.completed >= 20, `gpu1 served its share (${sims[1].counters.completed})`);
  const cap = 2 + QUEUE_ALLOWANCE;
  assert.ok(peakLate <= cap, `gpu1 held at most its cap ${cap} at once, saw ${peakLate}`);
});

test("least-loaded keeps a slower backend's batch slots full rather than queueing on a faster one", async (t) => {
  // Both run 4 at a time; gpu1 is 2x slower. Weighting by speed (ms per token, as an earlier build
  // did) gave it ~2.7 of 8 and queued the rest on gpu0, where they wait while gpu1's slots idle.
  const { url, sims, gateway } = await startReadyFleet(
    t,
    [{ engine: { tokenMs: 4, maxRunningRequests: 4 } }, { engine: { tokenMs: 4, maxRunningRequests: 4, slowdown: 2 } }],
    { routing: { load_interval: '50ms' } },
  );
  const slow = gateway.fleet.registry.get(sims[1].name);
  await waitFor(() => slow?.reported?.maxRunning === 4, { what: 'max_running_requests read' });
  const body = JSON.stringify({ text: 'hi', sampling_params: { max_new_tokens: 20 } });
  let stop = false;
  const clients = Array.from({ length: 8 }, async () => {
    while (!stop) {
      const res = await request(`${url}/generate`, { method: 'POST', body });
      await res.body.text();
    }
  });
  // Let the load settle, then sample how many requests the slow backend holds.
  await waitFor(() => sims[1].counters.completed >= 20, { what: 'load settled' });
  const samples: number[] = [];
  await waitFor(
    () => {
      samples.push(atBackend(sims[1]));
      return samples.length >= 300;
    },
    { intervalMs: 5, timeoutMs: 20_000, what: '300 samples' },
  );
  stop = true;
  await Promise.all(clients);
  const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
  t.diagnostic(`the slow backend held ${mean.toFixed(2)} of its 4 slots on average`);
  assert.ok(mean >= 3.3, `the slow backend held ${mean.toFixed(2)} of its 4 slots on average`);
});
