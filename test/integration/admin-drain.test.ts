/**
 * Drain and delete under traffic: the backend's in-flight stream runs to `data: [DONE]`, nothing
 * new reaches it meanwhile, and a deleted backend leaves the registry only once that stream ended.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import type { SimServer } from '../../src/sim/index.js';
import { backendsFor, createSims, startGateway } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

const streamBody = JSON.stringify({
  model: 'm',
  stream: true,
  max_tokens: 60,
  messages: [{ role: 'user', content: 'count' }],
});

async function startStream(url: string) {
  const res = await request(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: streamBody,
  });
  assert.equal(res.statusCode, 200);
  return res.body.text();
}

async function fleetWithStream(t: Parameters<typeof createSims>[0]) {
  const sims = await createSims(t, [{ engine: { tokenMs: 20 } }, { engine: { tokenMs: 1 } }]);
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady()));
  const { url, gateway } = await startGateway(t, { backends: backendsFor(sims), routing: { policy: 'round-robin' } });
  const registry = gateway.fleet.registry;
  await waitFor(() => registry.ready.length === 2, { what: 'both ready' });
  // Only the slow backend is ready while the stream starts, so the stream surely runs there.
  registry.apply(registry.get(sims[1].name)!, { type: 'drain' });
  const stream = startStream(url);
  await waitFor(() => registry.get(sims[0].name)?.inflight === 1, { what: 'the stream in flight' });
  registry.apply(registry.get(sims[1].name)!, { type: 'resume' });
  await waitFor(() => registry.ready.length === 2, { what: 'second back' });
  return { url, gateway, registry, stream, busy: sims[0] as SimServer, other: sims[1] as SimServer };
}

const generate = async (url: string) => {
  const res = await request(`${url}/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ text: 'hi', sampling_params: { max_new_tokens: 2 } }),
  });
  await res.body.text();
  return res.statusCode;
};

test('drain: the in-flight stream finishes whole; nothing new is sent to the drained backend', async (t) => {
  const { url, stream, busy, other, registry } = await fleetWithStream(t);

  const drained = await request(`${url}/fleet/backends/${busy.name}/drain`, { method: 'POST' });
  assert.equal(drained.statusCode, 200);
  const status = (await drained.body.json()) as { state: string; inflight: number };
  assert.equal(status.state, 'draining');
  assert.equal(status.inflight, 1, 'the stream is still running');

  const before = busy.counters.requests;
  const statuses = await Promise.all(Array.from({ length: 20 }, () => generate(url)));
  assert.deepEqual(new Set(statuses), new Set([200]));
  assert.equal(busy.counters.requests, before, 'no new request reached the drained backend');
  assert.ok(other.counters.requests >= 20);

  const body = await stream;
  assert.ok(body.endsWith('data: [DONE]\n\n'), 'the stream ran to its end');
  assert.ok(!body.includes('"error"'));
  assert.equal(busy.counters.completed, 1);
  assert.equal(registry.get(busy.name)?.state, 'draining', 'stays drained until resumed');
});

test('delete: 202 while a stream runs; removed once it finished; the stream is whole', async (t) => {
  const { url, stream, busy, registry } = await fleetWithStream(t);
  const backend = registry.get(busy.name)!;

  const deleted = await request(`${url}/fleet/backends/${busy.name}`, { method: 'DELETE' });
  assert.equal(deleted.statusCode, 202);
  const answer = (await deleted.body.json()) as { state: string; removed: boolean; inflight: number };
  assert.equal(answer.removed, false, 'still finishing its request');
  assert.equal(answer.state, 'draining');
  assert.equal(registry.get(busy.name), backend, 'listed until idle');
  assert.equal(registry.ready.includes(backend), false);

  const before = busy.counters.requests;
  for (let i = 0; i < 5; i++) assert.equal(await generate(url), 200);
  assert.equal(busy.counters.requests, before);

  const body = await stream;
  assert.ok(body.endsWith('data: [DONE]\n\n'));
  await waitFor(() => registry.get(busy.name) === undefined, { what: 'removed after the stream' });
  assert.equal(registry.size, 1);

  const again = await request(`${url}/fleet/backends/${busy.name}/drain`, { method: 'POST' });
  assert.equal(again.statusCode, 404);
  await again.body.dump();
});
