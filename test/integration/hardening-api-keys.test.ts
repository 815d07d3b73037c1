/**
 * Keys both ways: `auth.api_keys` lets only known clients through (401 otherwise; fleetgate's own
 * endpoints need none), and `upstream.api_key` is what backends started with `--api-key` get, on
 * probes and on traffic, in place of whatever the client sent.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { backendsFor, createSims, startGateway } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

const generate = async (url: string, authorization?: string) => {
  const res = await request(`${url}/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) },
    body: JSON.stringify({ text: 'hi', sampling_params: { max_new_tokens: 2 } }),
  });
  return { status: res.statusCode, body: await res.body.text() };
};

test('auth.api_keys: 401 without a known key, 200 with any; own endpoints need none', async (t) => {
  const [sim] = await createSims(t, [{}]);
  sim.start();
  await sim.whenReady();
  const { url, gateway } = await startGateway(t, {
    backends: backendsFor([sim]),
    auth: { api_keys: ['key-one', 'key-two'] },
  });
  await waitFor(() => gateway.fleet.registry.ready.length === 1, { what: 'ready' });

  for (const authorization of [undefined, 'Bearer nope', 'Bearer key-one-and-more', 'key-one', 'Basic a2V5LW9uZQ==']) {
    const answer = await generate(url, authorization);
    assert.equal(answer.status, 401, String(authorization));
    const error = (JSON.parse(answer.body) as { error: { type: string; code: number } }).error;
    assert.equal(error.type, 'authentication_error');
    assert.equal(error.code, 401);
  }
  assert.equal(sim.counters.requests, 0, 'refused requests never reach a backend');
  assert.equal((await generate(url, 'Bearer key-one')).status, 200);
  assert.equal((await generate(url, 'Bearer key-two')).status, 200, 'the proxy keeps serving, with either key');
  // RFC 7235: the scheme is case-insensitive, on proxied traffic and on /v1/models alike.
  for (const authorization of ['bearer key-one', 'BEARER key-two', 'Bearer  key-one']) {
    assert.equal((await generate(url, authorization)).status, 200, authorization);
    const models = await request(`${url}/v1/models`, { headers: { authorization } });
    assert.equal(models.statusCode, 200, `/v1/models with ${authorization}`);
    await models.body.dump();
  }
  const refusedModels = await request(`${url}/v1/models`, { headers: { authorization: 'bearer nope' } });
  assert.equal(refusedModels.statusCode, 401, '/v1/models refuses an unknown key');
  await refusedModels.body.dump();
  for (const path of ['/livez', '/readyz', '/health', '/metrics', '/fleet/status']) {
    const res = await request(`${url}${path}`);
    assert.equal(res.statusCode, 200, path);
    await res.body.dump();
  }
});

test('upstream.api_key: a backend started with --api-key becomes ready and serves; without it, it stays out', async (t) => {
  const [keyed, alsoKeyed] = await createSims(t, [{ apiKey: 'up-secret' }, { apiKey: 'up-secret' }]);
  keyed.start();
  alsoKeyed.start();
  await Promise.all([keyed.whenReady(), alsoKeyed.whenReady()]);

  const { url, gateway } = await startGateway(t, {
    backends: backendsFor([keyed]),
    upstream: { api_key: 'up-secret' },
    auth: { api_keys: ['client-key'] },
    health: { starting_interval: '50ms' },
  });
  await waitFor(() => gateway.fleet.registry.ready.length === 1, { what: 'ready with the upstream key' });
  const answer = await generate(url, 'Bearer client-key');
  assert.equal(answer.status, 200, answer.body);
  assert.ok(JSON.parse(answer.body).meta_info, 'a real answer, not the backend’s 401');

  const without = await startGateway(t, {
    backends: backendsFor([alsoKeyed]),
    health: { starting_interval: '50ms' },
    queue: { timeout: '200ms' },
  });
  const registry = without.gateway.fleet.registry;
  await waitFor(() => /401/.test(registry.get(alsoKeyed.name)?.lifecycle.snapshot.reason ?? ''), {
    what: 'probes refused without the key',
  });
  assert.equal(registry.ready.length, 0, 'never admitted');
  assert.equal((await generate(without.url)).status, 503);
  assert.equal(alsoKeyed.counters.requests, 0);
});
