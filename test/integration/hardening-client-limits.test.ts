/**
 * Limits against bad or slow clients, each with a clear error and no harm to anyone else: request
 * body size (413), header size (431), slow headers (slowloris: 408 and closed), keep-alive idle
 * timeout, and a cap on concurrent connections.
 */
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { test } from 'node:test';
import { request } from 'undici';
import { startGateway } from '../helpers/fleet.js';
import { startRawBackend, writeJson } from '../helpers/raw-backend.js';
import { openSocket, rawExchange } from '../helpers/raw-client.js';
import { waitFor } from '../helpers/wait.js';

async function limitedFleet(t: Parameters<typeof startGateway>[0], limits: Record<string, unknown>) {
  const backend = await startRawBackend(t, (socket, seen) =>
    writeJson(socket, 200, { path: seen.path, bytes: seen.body.length }),
  );
  const { url, gateway } = await startGateway(t, {
    backends: [{ url: backend.url, name: 'b', kind: 'openai' }],
    health: { starting_interval: '50ms' },
    limits,
  });
  await waitFor(() => gateway.fleet.registry.ready.length === 1, { what: 'ready' });
  const stillServing = async () => {
    const res = await request(`${url}/v1/ok`, {
      method: 'POST',
      body: '{"x":1}',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(res.statusCode, 200, 'the proxy keeps serving');
    await res.body.dump();
  };
  return { url, port: Number(new URL(url).port), backend, stillServing };
}

/** One request on an open keep-alive socket; resolves with the status line's code, or null if the socket closed. */
function exchangeOn(socket: Socket, path: string): Promise<number | null> {
  return new Promise((resolve) => {
    let data = '';
    const onData = (chunk: Buffer) => {
      data += chunk.toString('latin1');
      const end = data.indexOf('\r\n\r\n');
      const length = /content-length: (\d+)/i.exec(data)?.[1];
      if (end >= 0 && length !== undefined && data.length >= end + 4 + Number(length)) done(Number(data.slice(9, 12)));
    };
    const onClose = () => done(null);
    const done = (status: number | null) => {
      socket.off('data', onData);
      socket.off('close', onClose);
      resolve(status);
    };
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
  });
}

test('a body over limits.body_size: 413 with an OpenAI-style error; nothing forwarded', async (t) => {
  const { url, backend, stillServing } = await limitedFleet(t, { body_size: '1KiB' });
  const res = await request(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'x'.repeat(2048) }),
  });
  assert.equal(res.statusCode, 413);
  const body = (await res.body.json()) as { error: { message: string; type: string; code: number } };
  assert.equal(body.error.code, 413);
  assert.equal(body.error.type, 'invalid_request_error');
  assert.match(body.error.message, /too large/i);
  assert.equal(backend.seen.length, 0);
  await stillServing();
});

test('headers over limits.header_size: 431, connection closed; others unaffected', async (t) => {
  const { port, stillServing } = await limitedFleet(t, { header_size: '2KiB' });
  const answer = await rawExchange(port, `GET /v1/ok HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(4096)}\r\n\r\n`);
  assert.match(answer.data, /^HTTP\/1\.1 431 /);
  assert.match(answer.data, /"error":\{"message":"request headers too large/);
  assert.ok(answer.closedByServer);
  await stillServing();
});

test('slow headers (slowloris): 408 and closed after limits.headers_timeout; others served meanwhile', async (t) => {
  const { port, stillServing } = await limitedFleet(t, { headers_timeout: '500ms' });
  const socket = await openSocket(port);
  t.after(() => socket.destroy());
  let received = '';
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString('latin1');
  });
  socket.on('error', () => {});
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now())));
  const started = performance.now();
  socket.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n');
  // One header line every 100 ms, never finishing: each byte resets no timer.
  const drip = setInterval(() => socket.write(`X-Drip-${Math.floor(performance.now())}: 1\r\n`), 100);
  t.after(() => clearInterval(drip));
  for (let i = 0; i < 3; i++) await stillServing();
  const closedAt = await closed;
  clearInterval(drip);
  const after = closedAt - started;
  assert.ok(after >= 450 && after < 3_000, `closed after ${after.toFixed(0)} ms`);
  assert.match(received, /^HTTP\/1\.1 408 /);
  assert.match(received, /"code":408/);
  await stillServing();
});

test('limits.max_connections: a connection beyond the cap is closed; the first ones keep working', async (t) => {
  const { port, stillServing } = await limitedFleet(t, { max_connections: 2 });
  const first = await openSocket(port);
  const second = await openSocket(port);
  t.after(() => {
    first.destroy();
    second.destroy();
  });
  assert.equal(await exchangeOn(first, '/v1/ok'), 200);
  assert.equal(await exchangeOn(second, '/v1/ok'), 200);

  const third = await rawExchange(port, 'GET /v1/ok HTTP/1.1\r\nHost: x\r\n\r\n', 2_000);
  assert.equal(third.data, '', 'refused: closed without an answer');
  assert.ok(third.closedByServer);

  assert.equal(await exchangeOn(first, '/v1/ok'), 200, 'the first connections keep working');
  assert.equal(await exchangeOn(second, '/v1/ok'), 200);
  first.destroy();
  second.destroy();
  await waitFor(
    async () => {
      await stillServing();
      return true;
    },
    { what: 'a new connection once others closed' },
  );
});

test('limits.keep_alive_timeout: an idle keep-alive connection is closed after it', async (t) => {
  const { port } = await limitedFleet(t, { keep_alive_timeout: '300ms' });
  const socket = await openSocket(port);
  t.after(() => socket.destroy());
  socket.on('error', () => {});
  assert.equal(await exchangeOn(socket, '/v1/ok'), 200);
  const idleFrom = performance.now();
  await new Promise((resolve) => socket.once('close', resolve));
  const idle = performance.now() - idleFrom;
  assert.ok(idle >= 250 && idle < 2_000, `closed after ${idle.toFixed(0)} ms idle`);
});
