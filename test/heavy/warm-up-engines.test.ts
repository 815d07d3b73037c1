/**
 * As shipped, with the start-up warm-up on (its default): fleetgate sends engines only the probes and
 * the load scrape docs/operations.md lists. Each test reproduces a symptom of a warm-up that sent its
 * one-token requests through the real fleet: a backend ejected by fleetgate's own traffic, a client
 * queued behind the warm-up, a drained or hanging backend that still received requests (the skewed
 * round-robin split is core-contract.test.ts's first test).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { chat } from '../helpers/chat-load.js';
import { createSims } from '../helpers/fleet.js';
import { HEAVY } from '../helpers/heavy.js';
import { type RawBackend, startRawBackend, writeJson } from '../helpers/raw-backend.js';
import { startShipped } from '../helpers/shipped.js';
import { waitFor } from '../helpers/wait.js';

const CHAT = {
  id: 'c',
  object: 'chat.completion',
  choices: [{ index: 0, message: { role: 'assistant', content: 'ok' } }],
};

async function readyz(url: string): Promise<number> {
  const res = await request(`${url}/readyz`);
  await res.body.dump();
  return res.statusCode;
}

const untilReadyz = (url: string) => waitFor(async () => (await readyz(url)) === 200, { what: '/readyz 200' });

/** Up to `ms` for fleetgate's own traffic to reach a backend (it should never come). */
const graceFor = (backend: RawBackend, ms = 300) => {
  const until = Date.now() + ms;
  return waitFor(() => backend.seen.length > 0 || Date.now() > until, { what: 'a first request or the grace' });
};

test(
  'idle for 30 s as shipped (warm-up on): engines get only the documented probes and load scrape',
  HEAVY,
  async (t) => {
    const sims = await createSims(t, [{}, {}, {}]);
    for (const sim of sims) sim.start();
    await Promise.all(sims.map((sim) => sim.whenReady()));
    const backends = sims.map((sim) => ({ url: sim.url, name: sim.name }));
    const defaults = { health: { interval: '10s', starting_interval: '1s', timeout: '5s' } };
    const { gateway, url } = await startShipped(t, 'shipped', backends, defaults);
    await untilReadyz(url);
    assert.ok(gateway.config.upstream.warm_up, 'the shipped config warms up');
    const started = Date.now();
    await waitFor(() => Date.now() - started >= 30_000, { timeoutMs: 35_000, intervalMs: 500, what: '30 s idle' });
    const seconds = (Date.now() - started) / 1000 + 2;
    for (const sim of sims) {
      const { byPath, requests } = sim.counters;
      assert.equal(requests, 0, `${sim.name} got no inference request: ${JSON.stringify(byPath)}`);
      assert.deepEqual(
        Object.keys(byPath).filter((path) => !['/health', '/model_info', '/metrics', '/server_info'].includes(path)),
        [],
        `${sim.name}: only documented paths`,
      );
      // docs/operations.md: /metrics every load_interval (250 ms); /health and /model_info once per
      // probe (1 s while starting, 10 s when ready); /server_info once per admission.
      assert.ok(byPath['/metrics'] <= seconds / 0.25 + 2, `${sim.name} /metrics ${byPath['/metrics']}`);
      assert.ok(byPath['/health'] <= seconds / 10 + 3, `${sim.name} /health ${byPath['/health']}`);
      assert.ok((byPath['/server_info'] ?? 0) <= 1, `${sim.name} /server_info ${byPath['/server_info']}`);
    }
  },
);

test('a backend answering 500 during start-up is not ejected by fleetgate own traffic', async (t) => {
  let failing = true;
  const flaky = await startRawBackend(t, (socket) =>
    failing ? writeJson(socket, 500, { error: 'starting' }) : writeJson(socket, 200, CHAT),
  );
  const steady = await startRawBackend(t, (socket) => writeJson(socket, 200, CHAT));
  const { gateway, url } = await startShipped(t, 'shipped', [
    { url: flaky.url, name: 'flaky', kind: 'openai' },
    { url: steady.url, name: 'steady', kind: 'openai' },
  ]);
  const states: string[] = [];
  gateway.fleet.registry.on('transition', ({ backend, to }) => {
    if (backend.name === 'flaky') states.push(to);
  });
  await untilReadyz(url);
  await graceFor(flaky);
  failing = false;
  assert.equal(flaky.seen.length, 0, 'no request of fleetgate reached it');
  assert.ok(!states.includes('unhealthy'), `never ejected: ${states.join(' -> ')}`);
  assert.equal(gateway.fleet.registry.get('flaky')?.state, 'ready');
});

test('max_inflight_per_backend 1: a client first requests wait for nothing of fleetgate own', async (t) => {
  const slow = await startRawBackend(t, (socket) => setTimeout(() => writeJson(socket, 200, CHAT), 300));
  const { gateway, url } = await startShipped(t, 'shipped', [{ url: slow.url, name: 'slow', kind: 'openai' }], {
    routing: { max_inflight_per_backend: 1 },
    queue: { timeout: '2s' },
  });
  await waitFor(() => gateway.fleet.registry.ready.length === 1, { what: 'the backend admitted' });
  await graceFor(slow);
  const answers = await Promise.all([chat(url, 1), chat(url, 1), chat(url, 1)]);
  assert.deepEqual(
    answers.map((a) => a.status),
    [200, 200, 200],
  );
  assert.equal(slow.seen.length, 3, 'the backend got the client requests only');
});

test('a drained backend and a hanging one get nothing of fleetgate own, before or after', async (t) => {
  let hanging = false;
  const drained = await startRawBackend(t, (socket) => writeJson(socket, 200, CHAT));
  const hung = await startRawBackend(t, (socket) => {
    if (!hanging) writeJson(socket, 200, CHAT);
  });
  const steady = await startRawBackend(t, (socket) => writeJson(socket, 200, CHAT));
  const { gateway, url } = await startShipped(t, 'shipped', [
    { url: drained.url, name: 'drained', kind: 'openai' },
    { url: hung.url, name: 'hung', kind: 'openai' },
    { url: steady.url, name: 'steady', kind: 'openai' },
  ]);
  await waitFor(() => gateway.fleet.registry.ready.length === 3, { what: 'all admitted' });
  await Promise.race([graceFor(drained), graceFor(hung)]);
  hanging = true;
  const drainedAt = drained.seen.length;
  const hungAt = hung.seen.length;
  const answer = await request(`${url}/fleet/backends/drained/drain`, { method: 'POST' });
  assert.equal(answer.statusCode, 200, await answer.body.text());
  await untilReadyz(url);
  await graceFor(steady);
  assert.equal(drained.seen.length, drainedAt, 'nothing new after the drain');
  assert.equal(hung.seen.length, hungAt, 'nothing new while it hangs');
  assert.deepEqual([drainedAt, hungAt], [0, 0], 'and nothing before either');
});
