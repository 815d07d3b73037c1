/**
 * DNS discovery without sockets: a stub resolver drives a bare registry. Records that appear become
 * backends; vanished ones are removed; NXDOMAIN/NODATA mean zero records, while SERVFAIL and
 * timeouts keep the current set.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { DnsDiscoveryConfig } from '../../src/config/types.js';
import { BackendSync } from '../../src/fleet/backend-sync.js';
import { backendForAddress, DnsDiscovery, type DnsResolver, resolveAddresses } from '../../src/fleet/dns-discovery.js';
import { FleetRegistry } from '../../src/fleet/registry.js';

const dnsError = (code: string) => Object.assign(new Error(`query ${code}`), { code });

/** Answers from `records`; a string entry is an error code for that family. */
function stub(records: {
  v4: string[] | string;
  v6: string[] | string;
}): DnsResolver & { set(next: typeof records): void } {
  let current = records;
  const answer = (value: string[] | string) =>
    typeof value === 'string' ? Promise.reject(dnsError(value)) : Promise.resolve([...value]);
  return {
    set: (next) => {
      current = next;
    },
    resolve4: async () => answer(current.v4),
    resolve6: async () => answer(current.v6),
  };
}

const config: DnsDiscoveryConfig = { dns: 'sglang.default.svc', port: 30000, interval: 60_000, kind: 'sglang' };
const newRegistry = () => new FleetRegistry({ rise: 1, fall: 3, stallAfter: 60_000, defaultCap: 0 });
const names = (registry: FleetRegistry) => registry.list().map((b) => b.name);

test('resolveAddresses: A and AAAA together; NXDOMAIN and NODATA are zero records; other errors throw', async () => {
  assert.deepEqual(await resolveAddresses(stub({ v4: ['10.0.0.2', '10.0.0.1'], v6: ['fd00::1'] }), 'x'), [
    '10.0.0.1',
    '10.0.0.2',
    'fd00::1',
  ]);
  assert.deepEqual(await resolveAddresses(stub({ v4: ['10.0.0.1'], v6: 'ENODATA' }), 'x'), ['10.0.0.1']);
  assert.deepEqual(await resolveAddresses(stub({ v4: 'ENOTFOUND', v6: 'ENOTFOUND' }), 'x'), []);
  for (const code of ['ESERVFAIL', 'ETIMEOUT', 'ECONNREFUSED']) {
    await assert.rejects(resolveAddresses(stub({ v4: code, v6: [] }), 'x'), { code });
    await assert.rejects(resolveAddresses(stub({ v4: ['10.0.0.1'], v6: code }), 'x'), { code });
  }
});

test('backendForAddress: ip:port names, IPv6 in brackets, the configured kind', () => {
  assert.deepEqual(backendForAddress('10.0.3.7', config), {
    url: 'http://10.0.3.7:30000',
    name: '10.0.3.7:30000',
    kind: 'sglang',
    log: null,
  });
  const v6 = backendForAddress('fd00::7', { ...config, kind: 'vllm' });
  assert.equal(v6.url, 'http://[fd00::7]:30000');
  assert.equal(v6.name, '[fd00::7]:30000');
  assert.equal(v6.kind, 'vllm');
});

test('records appear and vanish; the registry follows; failures keep the set', async () => {
  const registry = newRegistry();
  const resolver = stub({ v4: ['10.0.0.1'], v6: 'ENODATA' });
  const discovery = new DnsDiscovery({ registry, config, resolver });

  await discovery.refresh();
  assert.deepEqual(names(registry), ['10.0.0.1:30000']);
  const first = registry.get('10.0.0.1:30000')!;
  assert.equal(first.state, 'down', 'a found backend still has to pass the readiness gate');

  resolver.set({ v4: ['10.0.0.1', '10.0.0.2'], v6: ['fd00::3'] });
  await discovery.refresh();
  assert.deepEqual(names(registry), ['10.0.0.1:30000', '10.0.0.2:30000', '[fd00::3]:30000']);
  assert.equal(registry.get('10.0.0.1:30000'), first, 'a record still there keeps its backend');

  resolver.set({ v4: 'ESERVFAIL', v6: 'ESERVFAIL' });
  await discovery.refresh();
  assert.equal(registry.size, 3, 'SERVFAIL says nothing about the pods: the set is kept');
  assert.match(discovery.lastError ?? '', /cannot resolve sglang\.default\.svc: ESERVFAIL/);

  resolver.set({ v4: ['10.0.0.2'], v6: 'ENODATA' });
  await discovery.refresh();
  assert.deepEqual(names(registry), ['10.0.0.2:30000'], 'vanished records are removed (idle: at once)');
  assert.equal(discovery.lastError, null);

  resolver.set({ v4: 'ENOTFOUND', v6: 'ENOTFOUND' });
  await discovery.refresh();
  assert.equal(registry.size, 0, 'NXDOMAIN: zero records, zero backends');
});

test('a vanished record with requests in flight is drained first and removed when they finish', async () => {
  const registry = newRegistry();
  const resolver = stub({ v4: ['10.0.0.1'], v6: [] });
  const discovery = new DnsDiscovery({ registry, config, resolver });
  await discovery.refresh();
  const backend = registry.get('10.0.0.1:30000')!;
  registry.take(backend);

  resolver.set({ v4: [], v6: [] });
  await discovery.refresh();
  assert.equal(backend.state, 'draining');
  assert.equal(registry.get(backend.name), backend, 'kept while a request runs');

  resolver.set({ v4: ['10.0.0.1'], v6: [] });
  await discovery.refresh();
  assert.equal(registry.get(backend.name), backend, 'the record came back, but the old backend is still finishing');

  registry.release(backend);
  await Promise.resolve();
  const fresh = registry.get('10.0.0.1:30000');
  assert.ok(fresh && fresh !== backend, 'then a fresh backend takes its place');
  assert.notEqual(fresh.state, 'draining');
});

test('an address already configured statically is left to the static backend', async () => {
  const registry = newRegistry();
  const configured = new BackendSync(registry);
  configured.apply([{ url: 'http://10.0.0.1:30000', name: 'gpu0', kind: 'sglang', log: null }]);
  const discovery = new DnsDiscovery({ registry, config, resolver: stub({ v4: ['10.0.0.1', '10.0.0.2'], v6: [] }) });
  await discovery.refresh();
  assert.deepEqual(names(registry), ['gpu0', '10.0.0.2:30000']);
});
