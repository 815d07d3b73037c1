/** The data plane in front of the attempt loop, on a real node:http server with a recording forward. */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { type TestContext, test } from 'node:test';
import pino from 'pino';
import { Client } from 'undici';
import type { Config } from '../../src/config/types.js';
import { validateConfig } from '../../src/config/validate.js';
import { createDataPlane, OWN_PATHS } from '../../src/proxy/data-plane.js';
import { rawExchange } from '../helpers/raw-client.js';

interface Forwarded {
  method: string;
  body: Buffer | null;
}

async function plane(
  t: TestContext,
  raw: Record<string, unknown> = {},
  broken: (path: string) => boolean = () => false,
) {
  const config: Config = validateConfig({ backends: ['http://127.0.0.1:9'], ...raw }, 'test');
  const forwarded: Forwarded[] = [];
  let closing = false;
  const handle = createDataPlane({
    config: () => config,
    closing: () => closing,
    logger: pino({ level: 'silent' }),
    forward: (req: IncomingMessage, res, body) => {
      if (broken(req.url ?? '')) throw new Error('bug on the way upstream');
      forwarded.push({ method: req.method ?? '', body });
      res.end('forwarded');
    },
  });
  const server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const client = new Client(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);

  t.after(async () => {
    await client.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  const port = (server.address() as AddressInfo).port;
  return { client, port, forwarded, config, startClosing: () => (closing = true) };
}

async function errorOf(res: Awaited<ReturnType<Client['request']>>) {
  return ((await res.body.json()) as { error: { message: string; type: string; code: number } }).error;
}

test('own endpoints go to fastify, everything else to the data plane', () => {
  for (const path of ['/livez', '/readyz', '/health', '/metrics', '/fleet', '/fleet/', '/fleet/status', '/fleet?x=1'])
    assert.ok(OWN_PATHS.test(path), path);
  for (const path of [
    '/',
    '/v1/chat/completions',
    '/generate',
    '/metricsx',
    '/fleetwide',
    '/v1/fleet',
    'http://x/fleet',
  ])
    assert.ok(!OWN_PATHS.test(path), path);
});

test('a body sent in many chunks is forwarded whole; GET goes on at once with no body', async (t) => {
  const { client, forwarded } = await plane(t);
  const parts = Array.from({ length: 50 }, (_, i) => Buffer.from(`${i},`.repeat(200)));
  async function* chunks() {
    for (const part of parts) yield part;
  }
  const res = await client.request({ path: '/v1/completions', method: 'POST', body: Readable.from(chunks()) });
  assert.equal(await res.body.text(), 'forwarded');
  assert.deepEqual(forwarded[0].body, Buffer.concat(parts));
  const get = await client.request({ path: '/v1/models', method: 'GET' });
  await get.body.dump();
  assert.deepEqual(forwarded[1], { method: 'GET', body: null });
  const empty = await client.request({ path: '/flush_cache', method: 'POST' });
  await empty.body.dump();
  assert.deepEqual(forwarded[2], { method: 'POST', body: null });
});

test('limits.body_size: 413 on the declared length and on a chunked body that grows past it', async (t) => {
  const { client, forwarded } = await plane(t, { limits: { body_size: '1KiB' } });
  const declared = await client.request({ path: '/v1/completions', method: 'POST', body: 'x'.repeat(1025) });
  assert.equal(declared.statusCode, 413);
  assert.equal(declared.headers.connection, 'close');
  assert.match((await errorOf(declared)).message, /too large: more than limits.body_size \(1024 bytes\)/);
  async function* growing() {
    for (let i = 0; i < 8; i++) yield Buffer.alloc(200, 0x61);
  }
  const streamed = await client.request({ path: '/v1/completions', method: 'POST', body: Readable.from(growing()) });
  assert.equal(streamed.statusCode, 413);
  assert.equal((await errorOf(streamed)).code, 413);
  const fits = await client.request({ path: '/v1/completions', method: 'POST', body: 'x'.repeat(1024) });
  assert.equal(await fits.body.text(), 'forwarded');
  assert.equal(forwarded.length, 1);
});

test('a declared length over limits.body_size is refused before any of the body arrives', async (t) => {
  const { port, forwarded } = await plane(t, { limits: { body_size: '1KiB' } });
  const head = 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n';
  const answer = await rawExchange(port, head);
  assert.match(answer.data, /^HTTP\/1\.1 413 /);
  assert.ok(answer.closedByServer, 'the connection is closed rather than the body read');
  assert.equal(forwarded.length, 0);
});

test('client keys are read per request; absolute-form targets are refused', async (t) => {
  const { client, forwarded, config } = await plane(t);
  const open = await client.request({ path: '/v1/models', method: 'GET' });
  await open.body.dump();
  assert.equal(open.statusCode, 200);
  config.auth.api_keys = ['k1'];
  const refused = await client.request({ path: '/v1/models', method: 'GET' });
  assert.equal(refused.statusCode, 401);
  assert.equal((await errorOf(refused)).type, 'authentication_error');
  const keyed = await client.request({ path: '/v1/models', method: 'GET', headers: { authorization: 'Bearer k1' } });
  await keyed.body.dump();
  assert.equal(keyed.statusCode, 200);
  assert.equal(forwarded.length, 2);
});

test('once shutdown begins: 503, connection closed, nothing forwarded', async (t) => {
  const { client, forwarded, startClosing } = await plane(t);
  startClosing();
  const res = await client.request({ path: '/v1/completions', method: 'POST', body: '{}' });
  assert.equal(res.statusCode, 503);
  assert.equal(res.headers.connection, 'close');
  assert.equal((await errorOf(res)).type, 'fleet_unavailable');
  assert.equal(forwarded.length, 0);
});

test('a throw on the way upstream: that request gets a 500, the server keeps serving', async (t) => {
  const { client, forwarded } = await plane(t, {}, (path) => path === '/v1/bug');
  for (const method of ['GET', 'POST'] as const) {
    const res = await client.request({ path: '/v1/bug', method, body: method === 'POST' ? '{}' : undefined });
    assert.equal(res.statusCode, 500);
    assert.equal((await errorOf(res)).type, 'internal_error');
  }
  const ok = await client.request({ path: '/v1/fine', method: 'POST', body: '{}' });
  assert.equal(await ok.body.text(), 'forwarded');
  assert.equal(forwarded.length, 1);
});
