/**
 * DNS discovery with real traffic: two simulated SGLang servers on the same port at 127.0.0.1 and
 * 127.0.0.2 (both loopback on Linux), found through a stub resolver whose records change. Records
 * that appear join through the readiness gate and get traffic; a record that vanishes is drained
 * (its stream finishes) and removed; a DNS failure keeps the fleet; NXDOMAIN empties it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { request } from 'undici';
import { createGateway } from '../../src/app.js';
import { validateConfig } from '../../src/config/validate.js';
import type { DnsResolver } from '../../src/fleet/dns-discovery.js';
import { SimServer } from '../../src/sim/index.js';
import { freePort } from '../helpers/net.js';
import { waitFor } from '../helpers/wait.js';

class StubDns implements DnsResolver {
  records: string[] | 'ENOTFOUND' | 'ESERVFAIL' = [];
  async resolve4(): Promise<string[]> {
    if (typeof this.records === 'string') throw Object.assign(new Error(this.records), { code: this.records });
    return [...this.records];
  }
  async resolve6(): Promise<string[]> {
    throw Object.assign(new Error('ENODATA'), { code: 'ENODATA' });
  }
}

test('the fleet follows DNS records as they appear and vanish', async (t) => {
  const port = await freePort();
  const sims = ['127.0.0.1', '127.0.0.2'].map(
    (host, i) => new SimServer({ host, port, name: `pod${i}`, engine: { tokenMs: 10 }, timing: { warmupMs: 100 } }),
  );
  t.after(() => Promise.all(sims.map((sim) => sim.stop())));
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady()));

  const dns = new StubDns();
  dns.records = ['127.0.0.1'];
  const config = validateConfig(
    {
      listen: '127.0.0.1:0',
      discovery: { dns: 'sglang.default.svc.cluster.local', port, interval: '100ms' },
      health: { starting_interval: '50ms', interval: '200ms' },
      queue: { timeout: '300ms' },
      // Its one-token streams would count on the pods this test counts requests on.
      upstream: { warm_up: false },
    },
    'test',
  );
  const gateway = await createGateway(config, { logger: pino({ level: 'silent' }), resolver: dns });
  const url = await gateway.listen();
  t.after(() => gateway.close());
  const registry = gateway.fleet.registry;
  const names = () =>
    registry
      .list()
      .map((b) => b.name)
      .sort();
  const generate = async () => {
    const res = await request(`${url}/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'hi', sampling_params: { max_new_tokens: 2 } }),
    });
    await res.body.dump();
    return res.statusCode;
  };
  const [first, second] = [`127.0.0.1:${port}`, `127.0.0.2:${port}`];

  await waitFor(() => registry.get(first)?.state === 'ready', { what: 'first record ready' });
  assert.deepEqual(names(), [first]);
  assert.equal(await generate(), 200);

  dns.records = ['127.0.0.1', '127.0.0.2'];
  await waitFor(() => registry.get(second)?.state === 'ready', { what: 'the new record admitted' });
  assert.equal(sims[1].counters.requestsWhileNotReady, 0);
  await waitFor(
    async () => {
      assert.equal(await generate(), 200);
      return sims[1].counters.requests > 0;
    },
    { what: 'traffic on the new record' },
  );

  // A stream on the first pod, then its record vanishes: it drains, the stream finishes, it goes.
  registry.apply(registry.get(second)!, { type: 'drain' });
  const stream = request(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', prompt: 'x', stream: true, max_tokens: 40 }),
  }).then((res) => res.body.text());
  await waitFor(() => registry.get(first)?.inflight === 1, { what: 'stream on the first pod' });
  registry.apply(registry.get(second)!, { type: 'resume' });
  await waitFor(() => registry.get(second)?.state === 'ready', { what: 'second back' });

  dns.records = ['127.0.0.2'];
  await waitFor(() => registry.get(first)?.state === 'draining', { what: 'vanished record drained' });
  const before = sims[0].counters.requests;
  for (let i = 0; i < 5; i++) assert.equal(await generate(), 200);
  assert.equal(sims[0].counters.requests, before, 'nothing new to the vanished record');
  assert.ok((await stream).endsWith('data: [DONE]\n\n'), 'its stream finished whole');
  await waitFor(() => registry.get(first) === undefined, { what: 'vanished record removed' });
  assert.deepEqual(names(), [second]);

  dns.records = 'ESERVFAIL';
  const discovery = gateway.fleet.discovery!;
  await waitFor(() => discovery.lastError?.includes('ESERVFAIL'), { what: 'a failed round' });
  await discovery.refresh();
  assert.deepEqual(names(), [second], 'a DNS failure keeps the fleet');
  assert.equal(await generate(), 200);

  dns.records = 'ENOTFOUND';
  await waitFor(() => registry.size === 0, { what: 'NXDOMAIN empties the fleet' });
  assert.equal(await generate(), 503, 'no backend: the queue gives up with 503');
});

test('a reload that changes discovery re-resolves; switching it off removes what it found', async (t) => {
  const dns = new StubDns();
  dns.records = ['127.0.0.1', '127.0.0.2'];
  let raw: Record<string, unknown> = { discovery: { dns: 'pods.test', port: 9, interval: '1h' } };
  const build = () => validateConfig({ listen: '127.0.0.1:0', backends: ['http://127.0.0.3:9'], ...raw }, 'test');
  const gateway = await createGateway(build(), {
    logger: pino({ level: 'silent' }),
    resolver: dns,
    reloadConfig: build,
  });
  await gateway.listen();
  t.after(() => gateway.close());
  const registry = gateway.fleet.registry;
  const names = () =>
    registry
      .list()
      .map((b) => b.name)
      .sort();
  await waitFor(() => registry.size === 3, { what: 'two discovered + one static' });

  raw = { discovery: { dns: 'pods.test', port: 10, interval: '1h' } };
  const changed = await gateway.app.inject({ method: 'POST', url: '/fleet/reload' });
  assert.equal(changed.statusCode, 200, changed.body);
  assert.deepEqual(changed.json().applied, ['discovery.port']);
  await waitFor(() => registry.get('127.0.0.1:10') !== undefined, { what: 're-resolved with the new port' });
  assert.deepEqual(names(), ['127.0.0.1:10', '127.0.0.2:10', '127.0.0.3:9'], 'the old port’s backends left');

  raw = {};
  const off = await gateway.app.inject({ method: 'POST', url: '/fleet/reload' });
  assert.equal(off.statusCode, 200, off.body);
  assert.deepEqual(names(), ['127.0.0.3:9'], 'discovery off: its backends removed, the static one stays');
  assert.equal(gateway.fleet.discovery, null);
});
