/**
 * `rate_limit` through @fastify/rate-limit, end to end with the `openai` SDK as the client: over
 * the limit a 429 with `Retry-After` and an OpenAI-style `rate_limit_exceeded`, counted in a metric;
 * after `Retry-After` the same client goes through again. Keys are limited apart; a reload changes
 * the figures at once.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import OpenAI from 'openai';
import pino from 'pino';
import { request } from 'undici';
import { createGateway } from '../../src/app.js';
import { validateConfig } from '../../src/config/validate.js';
import { createSims } from '../helpers/fleet.js';
import { sampleValue } from '../helpers/prometheus-text.js';
import { waitFor } from '../helpers/wait.js';

const ask = (client: OpenAI) =>
  client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });

test('over rate_limit.max the openai SDK sees a 429 rate_limit_exceeded; after Retry-After it goes through', async (t) => {
  const [sim] = await createSims(t, [{ engine: { tokenMs: 1 } }]);
  sim.start();
  await sim.whenReady();
  let raw: Record<string, unknown> = {
    listen: '127.0.0.1:0',
    backends: [{ url: sim.url, name: sim.name }],
    rate_limit: { enabled: true, max: 2, window: '1500ms' },
  };
  const build = () => validateConfig(raw, 'rate-limit-test.yaml');
  const gateway = await createGateway(build(), { logger: pino({ level: 'silent' }), reloadConfig: build });
  const url = await gateway.listen();
  t.after(() => gateway.close());
  await waitFor(() => gateway.fleet.registry.ready.length === 1, { what: 'backend ready' });

  const alice = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'alice', maxRetries: 0 });
  const bob = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'bob', maxRetries: 0 });
  await ask(alice);
  await ask(alice);
  const refused = await ask(alice).then(
    () => assert.fail('the third request in the window went through'),
    (error: unknown) => error,
  );
  assert.ok(refused instanceof OpenAI.RateLimitError, `expected a RateLimitError, got ${String(refused)}`);
  assert.equal(refused.status, 429);
  assert.equal(refused.type, 'rate_limit_exceeded');
  assert.match(refused.message, /rate limit exceeded: 2 requests per window/);
  const retryAfter = Number(refused.headers?.get('retry-after'));
  assert.ok(retryAfter >= 1 && retryAfter <= 2, `Retry-After ${retryAfter}`);
  assert.equal((await ask(bob)).choices.length, 1, 'another key has its own budget');

  const metrics = await (await request(`${url}/metrics`)).body.text();
  assert.equal(sampleValue(metrics, 'fleetgate_rate_limited_total', { by: 'api_key' }), 1);

  await sleep(retryAfter * 1000);
  assert.equal((await ask(alice)).choices.length, 1, 'through again after Retry-After');

  // A reload changes the figures at once; turning the plugin on or off needs a restart.
  raw = { ...raw, rate_limit: { enabled: false, max: 100, window: '1500ms' } };
  const reloaded = await request(`${url}/fleet/reload`, { method: 'POST' });
  const answer = (await reloaded.body.json()) as { applied: string[]; restart_required: string[] };
  assert.deepEqual(answer.applied, ['rate_limit.max']);
  assert.deepEqual(answer.restart_required, ['rate_limit.enabled']);
  for (let i = 0; i < 5; i++) await ask(bob);
});
