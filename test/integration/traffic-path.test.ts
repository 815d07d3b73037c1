/**
 * The traffic path is fastify's: a hook registered on the app runs for proxied requests, bodies
 * arrive whole through the content-type parser (or 413). Shutdown's 503: proxy-queue.test.ts.
 */
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import pino from 'pino';
import { request } from 'undici';
import { createGateway } from '../../src/app.js';
import { validateConfig } from '../../src/config/validate.js';
import { startGateway } from '../helpers/fleet.js';
import { startRawBackend, writeJson } from '../helpers/raw-backend.js';
import { rawExchange } from '../helpers/raw-client.js';
import { waitFor } from '../helpers/wait.js';

async function echoFleet(t: Parameters<typeof startRawBackend>[0], raw: Record<string, unknown> = {}) {
  const backend = await startRawBackend(t, (socket, seen) =>
    writeJson(socket, 200, { method: seen.method, path: seen.path, bytes: seen.body.length }),
  );
  const running = await startGateway(t, {
    backends: [{ url: backend.url, name: 'b', kind: 'openai' }],
    health: { starting_interval: '50ms' },
    ...raw,
  });
  await waitFor(() => running.gateway.fleet.registry.ready.length === 1, { what: 'backend ready' });
  return { ...running, backend };
}

test('an onRequest hook registered on the app runs for POST /v1/chat/completions', async (t) => {
  const backend = await startRawBackend(t, (socket, seen) => writeJson(socket, 200, { path: seen.path }));
  const config = validateConfig(
    {
      listen: '127.0.0.1:0',
      backends: [{ url: backend.url, name: 'b', kind: 'openai' }],
      health: { starting_interval: '50ms' },
    },
    'test',
  );
  const gateway = await createGateway(config, { logger: pino({ level: 'silent' }) });
  const hooked: string[] = [];
  gateway.app.addHook('onRequest', async (req, reply) => {
    hooked.push(`${req.method} ${req.url}`);
    reply.header('x-hooked', 'yes');
  });
  const url = await gateway.listen();
  t.after(() => gateway.close());
  await waitFor(() => gateway.fleet.registry.ready.length === 1, { what: 'backend ready' });

  const res = await request(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  });
  assert.deepEqual(await res.body.json(), { path: '/v1/chat/completions' });
  assert.deepEqual(hooked, ['POST /v1/chat/completions']);
  assert.equal(res.headers['x-hooked'], 'yes', 'a header the hook set reaches the client with the proxied answer');
  assert.equal(backend.seen.length, 1);
});

test('a body sent in many chunks is forwarded whole; GET and an empty POST go with no body', async (t) => {
  const { url, backend } = await echoFleet(t);
  const parts = Array.from({ length: 50 }, (_, i) => Buffer.from(`${i},`.repeat(200)));
  const whole = Buffer.concat(parts);
  const res = await request(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: Readable.from(parts),
  });
  assert.equal(((await res.body.json()) as { bytes: number }).bytes, whole.length);
  assert.equal(backend.seen[0].body, whole.toString('latin1'), 'the bytes, not a re-encoding of them');
  const get = await request(`${url}/v1/models/x`);
  await get.body.dump();
  const empty = await request(`${url}/flush_cache`, { method: 'POST' });
  await empty.body.dump();
  assert.deepEqual(
    backend.seen.slice(1).map((r) => [r.method, r.path, r.body]),
    [
      ['GET', '/v1/models/x', ''],
      ['POST', '/flush_cache', ''],
    ],
  );
});

test('limits.body_size: 413 on the declared length and on a chunked body that grows past it', async (t) => {
  const { url, backend, gateway } = await echoFleet(t, { limits: { body_size: '1KiB' } });
  const declared = await request(`${url}/v1/completions`, { method: 'POST', body: 'x'.repeat(1025) });
  assert.equal(declared.statusCode, 413);
  assert.equal(declared.headers.connection, 'close');
  const error = ((await declared.body.json()) as { error: { message: string; code: number } }).error;
  assert.match(error.message, /too large: more than limits.body_size \(1024 bytes\)/);
  const growing = Array.from({ length: 8 }, () => Buffer.alloc(200, 0x61));
  const streamed = await request(`${url}/v1/completions`, { method: 'POST', body: Readable.from(growing) });
  assert.equal(streamed.statusCode, 413);
  await streamed.body.dump();
  const fits = await request(`${url}/v1/completions`, { method: 'POST', body: 'x'.repeat(1024) });
  assert.equal(((await fits.body.json()) as { bytes: number }).bytes, 1024);
  assert.equal(backend.seen.length, 1, 'only the body that fits went upstream');

  const port = Number(new URL(url).port);
  const head = 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n';
  const answer = await rawExchange(port, head);
  assert.match(answer.data, /^HTTP\/1\.1 413 /);
  assert.ok(answer.closedByServer, 'the connection is closed rather than the body read');
  assert.equal(gateway.fleet.registry.get('b')?.inflight, 0);
});
