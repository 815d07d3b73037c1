/**
 * Backends that answer badly: a bad status line, a body shorter than its Content-Length, an HTML
 * page for an API call, a broken SSE framing, a stream that stalls, no response headers in time.
 * The client gets a clean 502/504 JSON (or, once bytes were sent, a stream that cannot pass for a
 * whole answer), the failure counts against the backend, and the proxy keeps serving.
 */
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { test } from 'node:test';
import { request } from 'undici';
import { startGateway } from '../helpers/fleet.js';
import { type RawRequest, startRawBackend, writeJson } from '../helpers/raw-backend.js';
import { waitFor } from '../helpers/wait.js';

const SSE_HEAD = 'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n';
const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
const event = (i: number) => chunk(`data: {"choices":[{"index":0,"delta":{"content":"t${i}"}}]}\n\n`);

/** Per-path misbehaviour; `/v1/ok` always answers properly. */
const behaviours: Record<string, (socket: Socket) => void> = {
  '/v1/garbage': (socket) => socket.end('garbage\r\n\r\n'),
  '/v1/short': (socket) =>
    socket.end('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\nshort'),
  '/v1/html': (socket) => {
    const page = '<html><body><h1>Welcome to nginx!</h1></body></html>';
    socket.end(
      `HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: ${page.length}\r\nConnection: close\r\n\r\n${page}`,
    );
  },
  '/v1/bad-chunks': (socket) => socket.end(`${SSE_HEAD}${event(0)}zz-not-a-chunk-size\r\n\r\n`),
  '/v1/stall': (socket) => socket.write(`${SSE_HEAD}${event(0)}${event(1)}`),
  '/v1/no-headers': () => {},
};

async function badFleet(t: Parameters<typeof startGateway>[0], extra: Record<string, unknown> = {}) {
  const backend = await startRawBackend(t, (socket, seen: RawRequest) => {
    const misbehave = behaviours[seen.path];
    if (misbehave) misbehave(socket);
    else writeJson(socket, 200, { ok: true });
  });
  const { url, gateway } = await startGateway(t, {
    backends: [{ url: backend.url, name: 'bad', kind: 'openai' }],
    health: { starting_interval: '50ms', fall: 100 },
    ...extra,
  });
  await waitFor(() => gateway.fleet.registry.ready.length === 1, { what: 'ready' });
  /** `fleetgate_upstream_errors_total` of the backend, for one kind or summed over all. */
  const errorsOf = async (kind?: string) => {
    const prefix = `fleetgate_upstream_errors_total{backend="bad",kind="${kind ?? ''}`;
    const lines = (await gateway.metrics.render()).split('\n').filter((l) => l.startsWith(prefix));
    return lines.reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
  };
  const stillServing = async () => {
    const res = await request(`${url}/v1/ok`, {
      method: 'POST',
      body: '{}',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(res.statusCode, 200, 'the proxy keeps serving');
    assert.deepEqual(await res.body.json(), { ok: true });
  };
  return { url, gateway, errorsOf, stillServing };
}

const post = (url: string, path: string) =>
  request(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }] }),
  });

async function assertErrorJson(res: Awaited<ReturnType<typeof post>>, status: number, type: string, message: RegExp) {
  assert.equal(res.statusCode, status);
  assert.match(String(res.headers['content-type']), /application\/json/);
  const body = (await res.body.json()) as { error: { message: string; type: string; code: number } };
  assert.equal(body.error.code, status);
  assert.equal(body.error.type, type);
  assert.match(body.error.message, message);
}

test('a bad status line: clean 502 JSON; counted; the proxy keeps serving', async (t) => {
  const { url, errorsOf, stillServing } = await badFleet(t);
  await assertErrorJson(
    await post(url, '/v1/garbage'),
    502,
    'upstream_error',
    /malformed response.*does not match the HTTP\/1\.1 protocol/,
  );
  assert.equal(await errorsOf('bad_response'), 1);
  await stillServing();
});

test('a body shorter than its Content-Length never passes for a whole answer', async (t) => {
  const { url, errorsOf, stillServing } = await badFleet(t);
  const res = await post(url, '/v1/short');
  // The headers were already on their way; the cut body must surface as an error, not as "short".
  if (res.statusCode === 502) {
    await assertErrorJson(res, 502, 'upstream_error', /./);
  } else {
    assert.equal(res.statusCode, 200);
    await assert.rejects(res.body.text(), 'reading the cut body fails');
  }
  await waitFor(async () => (await errorsOf()) === 1, { what: 'counted' });
  await stillServing();
});

test('an HTML page in answer to an API call: 502 JSON, not the page; counted against the backend', async (t) => {
  const { url, errorsOf, stillServing, gateway } = await badFleet(t);
  await assertErrorJson(await post(url, '/v1/html'), 502, 'upstream_error', /HTML page/);
  assert.equal(await errorsOf('bad_response'), 1);
  assert.equal(gateway.fleet.registry.get('bad')?.inflight, 0, 'the slot was released');
  await stillServing();
  // A browser-style GET (e.g. FastAPI's /docs) still gets the page as it is.
  const docs = await request(`${url}/v1/html`);
  assert.equal(docs.statusCode, 200);
  assert.match(await docs.body.text(), /Welcome to nginx/);
});

test('broken SSE framing mid-stream: one error event, no [DONE]; the proxy keeps serving', async (t) => {
  const { url, errorsOf, stillServing } = await badFleet(t);
  const res = await post(url, '/v1/bad-chunks');
  assert.equal(res.statusCode, 200);
  const body = await res.body.text();
  assert.match(body, /^data: \{"choices"/);
  assert.ok(!body.includes('[DONE]'));
  const last =
    body
      .split('\n\n')
      .filter((e) => e !== '')
      .at(-1) ?? '';
  const error = JSON.parse(last.slice('data: '.length)) as { error: { message: string; type: string; code: number } };
  assert.equal(error.error.type, 'upstream_error');
  assert.equal(error.error.code, 502);
  assert.match(error.error.message, /Invalid character in chunk size/);
  assert.equal(await errorsOf(), 1);
  await stillServing();
});

test('a stream that stalls past upstream.stream_idle_timeout: error event 504, no [DONE]; the backend is held out for health.ejection_time', async (t) => {
  const { url, errorsOf, stillServing, gateway } = await badFleet(t, {
    upstream: { stream_idle_timeout: '400ms' },
    health: { starting_interval: '50ms', fall: 1, ejection_time: '1s' },
  });
  const started = performance.now();
  const res = await post(url, '/v1/stall');
  assert.equal(res.statusCode, 200);
  const body = await res.body.text();
  const took = performance.now() - started;
  assert.ok(took >= 350 && took < 3_000, `ended after ${took.toFixed(0)} ms`);
  const events = body.split('\n\n').filter((e) => e !== '');
  assert.equal(events.length, 3, 'the two chunks, then the error event');
  assert.ok(!body.includes('[DONE]'));
  const error = JSON.parse(events[2].slice('data: '.length)) as { error: { type: string; code: number } };
  assert.deepEqual(error.error, {
    message: 'backend stopped sending data mid-response',
    type: 'upstream_timeout',
    code: 504,
  });
  assert.equal(await errorsOf('stream_idle_timeout'), 1);
  const backend = gateway.fleet.registry.get('bad')!;
  assert.equal(backend.state, 'unhealthy', 'with fall: 1, the one passive failure ejects it');
  assert.match(backend.lifecycle.snapshot.reason ?? '', /timeout: stream_idle_timeout on live traffic/);
  const ejectedAt = backend.lifecycle.snapshot.since;
  await waitFor(() => backend.state === 'ready', { what: 're-admitted by its passing probes' });
  const heldMs = backend.lifecycle.snapshot.since - ejectedAt;
  assert.ok(heldMs >= 1_000, `held out ${heldMs} ms; its probes (every 50 ms) passed all along`);
  await stillServing();
});

test('no response headers within upstream.headers_timeout: 504 JSON; the proxy keeps serving', async (t) => {
  const { url, errorsOf, stillServing } = await badFleet(t, { upstream: { headers_timeout: '300ms' } });
  const started = performance.now();
  await assertErrorJson(await post(url, '/v1/no-headers'), 504, 'upstream_timeout', /no response in time/);
  assert.ok(performance.now() - started < 3_000);
  assert.equal(await errorsOf('headers_timeout'), 1);
  await stillServing();
});
