import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FleetRegistry } from '../../src/fleet/registry.js';
import { ProxyEventBus, type RequestRecord } from '../../src/proxy/request-record.js';
import { trackBackendPace } from '../../src/routing/backend-pace.js';

function record(backend: string, durationMs: number, completionTokens: number | null, outcome = 'ok'): RequestRecord {
  return {
    backend,
    method: 'POST',
    path: '/generate',
    status: 200,
    durationMs,
    ttfbMs: null,
    bytes: 100,
    retries: 0,
    outcome: outcome as RequestRecord['outcome'],
    completionTokens,
    streamed: false,
  };
}

test('pace: milliseconds per generated token, smoothed; reset when the backend leaves ready', () => {
  const registry = new FleetRegistry({ rise: 1, fall: 1, stallAfter: 60_000, defaultCap: 0 });
  const events = new ProxyEventBus();
  trackBackendPace(registry, events);
  const backend = registry.add({ url: 'http://127.0.0.1:1', name: 'gpu0', kind: 'sglang', log: null });
  registry.apply(backend, { type: 'probe', result: { ok: true, reachable: true, reason: null } });
  assert.equal(backend.pace, null);

  events.emit('request', record('gpu0', 200, 100));
  assert.equal(backend.pace, 2, 'the first answer sets it');
  events.emit('request', record('gpu0', 400, 100));
  assert.ok(backend.pace > 2 && backend.pace < 2.2, `moves a little toward 4 ms/token: ${backend.pace}`);
  const before = backend.pace;
  events.emit('request', record('gpu0', 10_000, null));
  events.emit('request', record('gpu0', 10_000, 10, 'client_abort'));
  events.emit('request', record('other', 10_000, 10));
  assert.equal(backend.pace, before, 'no usage, failed answers and other backends do not count');

  registry.apply(backend, { type: 'probe', result: { ok: false, reachable: false, reason: 'connection refused' } });
  assert.equal(backend.pace, null, 'a restarted server is a new process');
});
