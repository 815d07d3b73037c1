/**
 * fleetgate is not an open proxy: absolute-form targets and CONNECT are refused, the Host header
 * never picks the upstream, hop-by-hop headers stop at fleetgate both ways, and X-Forwarded-For /
 * -Proto are set. Each refusal is followed by a normal request that must still succeed.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { startGateway } from '../helpers/fleet.js';
import { type RawRequest, startRawBackend, writeJson } from '../helpers/raw-backend.js';
import { rawExchange } from '../helpers/raw-client.js';
import { waitFor } from '../helpers/wait.js';

/** A backend that answers every request with the request it saw, plus hop-by-hop headers of its own. */
async function echoFleet(t: Parameters<typeof startGateway>[0]) {
  const backend = await startRawBackend(t, (socket, seen: RawRequest) =>
    writeJson(socket, 200, seen, 'Keep-Alive: timeout=3, max=7\r\nX-Upstream-Hop: 1\r\nConnection: X-Upstream-Hop\r\n'),
  );
  const { url, gateway } = await startGateway(t, {
    backends: [{ url: backend.url, name: 'echo', kind: 'openai' }],
    health: { starting_interval: '50ms' },
  });
  await waitFor(() => gateway.fleet.registry.ready.length === 1, { what: 'echo ready' });
  const port = Number(new URL(url).port);
  const stillServing = async () => {
    const res = await request(`${url}/v1/echo`);
    assert.equal(res.statusCode, 200, 'the proxy keeps serving');
    return (await res.body.json()) as RawRequest;
  };
  return { url, port, backend, stillServing };
}

test('absolute-form request target: 400, nothing forwarded, the proxy keeps serving', async (t) => {
  const { port, backend, stillServing } = await echoFleet(t);
  const answer = await rawExchange(
    port,
    'GET http://evil.example/steal HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n',
  );
  assert.match(answer.data, /^HTTP\/1\.1 400 /);
  assert.match(answer.data, /"error":\{"message":"absolute-form request targets are not accepted/);
  assert.equal(backend.seen.length, 0, 'nothing reached a backend');
  const echoed = await stillServing();
  assert.equal(echoed.path, '/v1/echo');
});

test('CONNECT: 405 and the connection closed; the proxy keeps serving', async (t) => {
  const { port, backend, stillServing } = await echoFleet(t);
  const answer = await rawExchange(port, 'CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n');
  assert.match(answer.data, /^HTTP\/1\.1 405 Method Not Allowed\r\n/);
  assert.match(answer.data, /"type":"invalid_request_error","code":405/);
  assert.ok(answer.closedByServer, 'closed, no tunnel');
  assert.equal(backend.seen.length, 0);
  await stillServing();
});

test('Host naming another site is ignored: the upstream is the configured backend, with its own Host', async (t) => {
  const { url, backend } = await echoFleet(t);
  const res = await request(`${url}/v1/echo`, { headers: { host: 'evil.example:443' } });
  assert.equal(res.statusCode, 200);
  const seen = (await res.body.json()) as RawRequest;
  assert.equal(seen.headers.host, `127.0.0.1:${backend.port}`);
  assert.equal(backend.seen.length, 1);
});

test('hop-by-hop headers stop at fleetgate both ways; X-Forwarded-For and -Proto are set', async (t) => {
  const { port } = await echoFleet(t);
  // Raw, since HTTP client libraries refuse to send some of these.
  const answer = await rawExchange(
    port,
    'GET /v1/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close, x-secret\r\nX-Secret: 1\r\n' +
      'Keep-Alive: timeout=99\r\nProxy-Authorization: Basic Zm9vOmJhcg==\r\nTE: gzip\r\n' +
      'Upgrade: h2c\r\nX-Forwarded-For: 203.0.113.9\r\nX-Kept: yes\r\n\r\n',
  );
  assert.match(answer.data, /^HTTP\/1\.1 200 /);
  const [head, body] = answer.data.split('\r\n\r\n');
  const seen = JSON.parse(body) as RawRequest;
  for (const name of ['x-secret', 'keep-alive', 'proxy-authorization', 'te', 'upgrade']) {
    assert.equal(seen.headers[name], undefined, `${name} must not reach the backend`);
  }
  assert.equal(seen.headers['x-kept'], 'yes', 'end-to-end headers pass');
  assert.equal(seen.headers['x-forwarded-for'], '203.0.113.9, 127.0.0.1', 'appended with the peer address');
  assert.equal(seen.headers['x-forwarded-proto'], 'http');

  const res = {
    headers: Object.fromEntries(
      head
        .split('\r\n')
        .slice(1)
        .map((line) => {
          const colon = line.indexOf(':');
          return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()];
        }),
    ) as Record<string, string>,
  };
  assert.equal(res.headers['x-upstream-hop'], undefined, 'a header the backend named in Connection is dropped');
  assert.doesNotMatch(String(res.headers['keep-alive'] ?? ''), /max=7/, "the backend's Keep-Alive is not forwarded");
  assert.doesNotMatch(String(res.headers.connection ?? ''), /x-upstream-hop/i);
});

test('Expect: 100-continue and a chunked upload reach the backend as a plain body, not a 502', async (t) => {
  const { port, stillServing } = await echoFleet(t);
  const body = JSON.stringify({ prompt: 'x'.repeat(2000) });
  const half = Math.floor(body.length / 2);
  const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
  const answer = await rawExchange(
    port,
    'POST /v1/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n' +
      'Expect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n' +
      chunk(body.slice(0, half)) +
      chunk(body.slice(half)) +
      '0\r\n\r\n',
  );
  const final = answer.data.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, '');
  assert.match(final, /^HTTP\/1\.1 200 /, final.slice(0, 300));
  const seen = JSON.parse(final.split('\r\n\r\n')[1]) as RawRequest;
  assert.equal(seen.body, body, 'the whole body arrived');
  assert.equal(seen.headers['content-length'], String(Buffer.byteLength(body)));
  assert.equal(seen.headers['transfer-encoding'], undefined);
  assert.equal(seen.headers.expect, undefined);
  await stillServing();
});
