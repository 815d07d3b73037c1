/**
 * As shipped, with the start-up warm-up on (its default): fleetgate sends engines only the probes and
 * the load scrape docs/operations.md lists (30 s idle: test/heavy/warm-up-idle.test.ts). Each test reproduces a symptom of a warm-up that sent its
 * one-token requests through the real fleet: a backend ejected by fleetgate's own traffic, a client
 * queued behind the warm-up, a drained or hanging backend that still received requests (the skewed
 * round-robin split is core-contract.test.ts's first test).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { chat } from '../helpers/chat-load.js';
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
