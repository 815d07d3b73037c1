/**
 * The fleet dispatcher on its own, without fastify: undici's `request()` through it to real
 * backends on loopback. A refused connection is reported and the POST re-sent to another backend;
 * a queue that gives up reaches the caller as an error with a code; the request context reaches
 * the attempt; an attempt the progress watchdog ends before any byte is re-sent.
 */

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { request } from 'undici';
import type { BackendConfig } from '../../src/config/types.js';
import { ProgressWatchdog } from '../../src/fleet/progress-watchdog.js';
import { type Backend, FleetRegistry } from '../../src/fleet/registry.js';
import { FleetDispatcher } from '../../src/routing/dispatch/fleet-dispatcher.js';
import { UpstreamPools } from '../../src/routing/dispatch/upstream-pools.js';
import { createPolicy } from '../../src/routing/policies/create-policy.js';
import { RequestContext } from '../../src/routing/request-context.js';
import { freePorts } from '../helpers/net.js';
import { waitFor } from '../helpers/wait.js';
import { queueOn } from '../helpers/wait-queue.js';

const UPSTREAM = {
  connect_timeout: 2_000,
  headers_timeout: 10_000,
  stream_idle_timeout: 10_000,
  api_key: null,
  warm_up: false,
};

async function echoServer(t: { after(fn: () => unknown): void }) {
  const bodies: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      bodies.push(body);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ body }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise((resolve) => server.close(resolve)));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies };
}

function fleet(
  urls: string[],
  { timeoutMs = 5_000, watchdog }: { timeoutMs?: number; watchdog?: ProgressWatchdog<Backend> } = {},
) {
  const registry = new FleetRegistry({ rise: 1, fall: 3, stallAfter: 60_000, defaultCap: 0 });
  const backends = urls.map((url, i) => {
    const config: BackendConfig = { url, name: `b${i}`, kind: 'sglang', log: null };
    return registry.add(config);
  });
  const queue = queueOn(registry, {
    maxWaiting: 10,
    timeoutMs,
    policy: createPolicy('round-robin'),
  });
  const failures: string[] = [];
  const dispatcher = new FleetDispatcher({
    registry,
    queue,
    pools: new UpstreamPools(registry, UPSTREAM),
    retries: 2,
    observer: {
      failed: (backend, failure) => failures.push(`${backend.name}:${failure.kind}`),
      retried: () => {},
    },
    watchdog,
  });
  const makeReady = () => {
    for (const backend of backends)
      registry.apply(backend, { type: 'probe', result: { ok: true, reachable: true, reason: null } });
  };
  return { registry, backends, dispatcher, failures, makeReady };
}

test('a refused connection: reported, and the POST re-sent to another backend with its body', async (t) => {
  const live = await echoServer(t);
  const [closedPort] = await freePorts(1);
  const { dispatcher, failures, makeReady, backends } = fleet([`http://127.0.0.1:${closedPort}`, live.url]);
  t.after(() => dispatcher.close());
  makeReady();
  const context = new RequestContext();
  const res = await dispatcher.carrying(context, () =>
    request('http://ignored.invalid/v1/completions', {
      dispatcher,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"prompt":"hi"}',
    }),
  );
  assert.deepEqual(await res.body.json(), { body: '{"prompt":"hi"}' });
  assert.deepEqual(failures, ['b0:connect_refused']);
  assert.equal(context.retries, 1);
  assert.equal(context.backend, 'b1', 'the context names the backend that answered');
  assert.deepEqual(live.bodies, ['{"prompt":"hi"}']);
  assert.deepEqual(
    backends.map((b) => b.inflight),
    [0, 0],
    'every lease released',
  );
});

test('no ready backend until the queue gives up: the caller gets an error whose code names it', async (t) => {
  const live = await echoServer(t);
  const { dispatcher } = fleet([live.url], { timeoutMs: 100 });
  t.after(() => dispatcher.close());
  await assert.rejects(request('http://ignored.invalid/v1/models', { dispatcher }), {
    code: 'FLEETGATE_QUEUE_TIMEOUT',
  });
  assert.deepEqual(live.bodies, []);
});

test('after close, a request is refused with the shutdown code', async () => {
  const { dispatcher } = fleet(['http://127.0.0.1:9']);
  await dispatcher.close();
  await assert.rejects(request('http://ignored.invalid/v1/models', { dispatcher }), { code: 'FLEETGATE_SHUTDOWN' });
});

test('the progress watchdog ends an attempt with no byte: the POST is re-sent to another backend', async (t) => {
  const heard: string[] = [];
  const silent = createServer((req) => {
    heard.push(req.url ?? '');
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    silent.closeAllConnections();
    return new Promise((resolve) => silent.close(resolve));
  });
  const live = await echoServer(t);
  let clock = 0;
  const ejected: string[] = [];
  const watchdog = new ProgressWatchdog<Backend>({
    timeoutMs: 1_000,
    now: () => clock,
    isReady: () => true,
    hasOwnQueue: () => false,
    eject: (backend) => ejected.push(backend.name),
  });
  const silentUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
  const { dispatcher, failures, makeReady, backends } = fleet([silentUrl, live.url], { watchdog });
  t.after(() => dispatcher.close());
  makeReady();
  const context = new RequestContext();
  const answer = dispatcher.carrying(context, () =>
    request('http://ignored.invalid/v1/completions', {
      dispatcher,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"prompt":"hi"}',
    }),
  );
  await waitFor(() => heard.length === 1, { what: 'the silent backend got the request' });
  clock += 1_000;
  watchdog.tick();
  const res = await answer;
  assert.deepEqual(await res.body.json(), { body: '{"prompt":"hi"}' });
  assert.deepEqual(ejected, ['b0']);
  assert.deepEqual(failures, ['b0:no_progress']);
  assert.equal(context.backend, 'b1');
  assert.deepEqual(
    backends.map((b) => b.inflight),
    [0, 0],
    'every lease released',
  );
});
