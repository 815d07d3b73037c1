/**
 * The start-up warm-up runs the traffic path on a private copy of fleetgate in front of an
 * in-process engine, then throws both away; it spends no client's rate-limit budget and a closing
 * fleetgate stops it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { request } from 'undici';
import { createGateway } from '../../src/app.js';
import type { Config } from '../../src/config/types.js';
import { warmUp } from '../../src/warm-up/warm-up.js';
import { createSims } from '../helpers/fleet.js';
import { shippedConfig, startShipped } from '../helpers/shipped.js';
import { waitFor } from '../helpers/wait.js';

const refused = (url: string) =>
  request(`${url}/health`).then(
    () => false,
    (error: { code?: string }) => error.code === 'ECONNREFUSED',
  );

test('64 streams through a private copy of the traffic path, then the copy and its engine are gone', async (t) => {
  const sims = await createSims(t, [{}]);
  const config = shippedConfig('shipped', [{ url: sims[0].url, name: 'gpu0' }], { auth: { api_keys: ['sk-a'] } });
  const copies: Config[] = [];
  let copyUrl = '';
  const result = await warmUp(
    config,
    async (copy) => {
      copies.push(copy);
      const gateway = await createGateway(copy, { logger: pino({ level: 'silent' }) });
      return {
        listen: async () => {
          copyUrl = await gateway.listen();
          return copyUrl;
        },
        close: () => gateway.close(),
      };
    },
    new AbortController().signal,
  );
  assert.deepEqual({ served: result.served, error: result.error }, { served: 64, error: null });
  assert.equal(copies.length, 1);
  const [copy] = copies;
  assert.deepEqual(copy.auth.api_keys, ['sk-a'], 'the same guard as the running config');
  assert.notEqual(copy.backends[0].url, sims[0].url, 'the copy fronts the in-process engine only');
  assert.equal(copy.backends.length, 1);
  assert.ok(await refused(copyUrl), 'the copy listens no more');
  assert.ok(await refused(copy.backends[0].url), 'the engine listens no more');
  assert.equal(sims[0].counters.requests + (sims[0].counters.byPath['/health'] ?? 0), 0, 'the real backend unseen');
});

test('warm-up x API keys and rate limits: a client has its whole budget once fleetgate is ready', async (t) => {
  const sims = await createSims(t, [{}]);
  sims[0].start();
  await sims[0].whenReady();
  const { gateway, url } = await startShipped(t, 'shipped', [{ url: sims[0].url, name: 'gpu0' }], {
    auth: { api_keys: ['sk-a'] },
    rate_limit: { enabled: true, max: 4, window: '1m' },
  });
  await waitFor(async () => (await request(`${url}/readyz`)).statusCode === 200, { what: '/readyz 200' });
  const warmUpSeconds = await gateway.metrics
    .render()
    .then((text) => /^fleetgate_warm_up_seconds (\S+)/m.exec(text)?.[1]);
  assert.ok(Number(warmUpSeconds) > 0, `the warm-up ran (${warmUpSeconds} s)`);
  const statuses: number[] = [];
  for (let i = 0; i < 5; i++) {
    const res = await request(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-a' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }),
    });
    await res.body.dump();
    statuses.push(res.statusCode);
  }
  assert.deepEqual(statuses, [200, 200, 200, 200, 429]);
  assert.equal(sims[0].counters.requests, 4, 'only the client requests reached the engine');
});

test('closing fleetgate during its warm-up stops the warm-up; the copy closes with it', async (t) => {
  const sims = await createSims(t, [{}]);
  const lines: Array<{ msg: string; warmUp?: { error: string | null } }> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  const gateway = await createGateway(shippedConfig('shipped', [{ url: sims[0].url, name: 'gpu0' }]), { logger });
  const url = await gateway.listen();
  await gateway.close();
  const warmUpLine = lines.find((line) => line.warmUp !== undefined);
  assert.equal(warmUpLine?.warmUp?.error, 'stopped', JSON.stringify(warmUpLine));
  assert.ok(await refused(url));
});
