/**
 * `POST /fleet/reload` under streaming load: a backend added, one removed, one changed (new URL
 * under the same name), one unchanged. No client request fails; the unchanged backend is the same
 * object with its state and counters; the removed one finishes its streams and then leaves. An
 * invalid new config is refused with its reason and the running config stays.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { request } from 'undici';
import { createGateway } from '../../src/app.js';
import { validateConfig } from '../../src/config/validate.js';
import type { SimServer } from '../../src/sim/index.js';
import { createSims, takesOf } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

async function startReloadable(t: { after(fn: () => unknown): void }, first: Record<string, unknown>) {
  let raw = first;
  const build = () => validateConfig({ listen: '127.0.0.1:0', ...raw }, 'reload-test.yaml');
  const gateway = await createGateway(build(), { logger: pino({ level: 'silent' }), reloadConfig: build });
  const url = await gateway.listen();
  t.after(() => gateway.close());
  const reload = async (next: Record<string, unknown>) => {
    raw = next;
    const res = await request(`${url}/fleet/reload`, { method: 'POST' });
    return {
      status: res.statusCode,
      body: (await res.body.json()) as Record<string, unknown> & { error?: { message: string } },
    };
  };
  return { gateway, url, reload };
}

const entry = (sim: SimServer, name = sim.name) => ({ url: sim.url, name });
const health = { starting_interval: '50ms', interval: '200ms' };

test('reload applies added / removed / changed as a diff while streams run; no request fails', async (t) => {
  const [a, b, c, d, e] = await createSims(
    t,
    Array.from({ length: 5 }, () => ({ engine: { tokenMs: 4 } })),
  );
  for (const sim of [a, b, c, d, e]) sim.start();
  await Promise.all([a, b, c, d, e].map((sim) => sim.whenReady()));
  const { gateway, url, reload } = await startReloadable(t, {
    backends: [entry(a), entry(b), entry(c, 'gpu2')],
    health,
  });
  const registry = gateway.fleet.registry;
  await waitFor(() => registry.ready.length === 3, { what: 'three ready' });

  let stop = false;
  const failures: string[] = [];
  let completed = 0;
  const client = async () => {
    while (!stop) {
      const res = await request(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', stream: true, max_tokens: 30, messages: [{ role: 'user', content: 'x' }] }),
      });
      const body = await res.body.text();
      if (res.statusCode !== 200 || !body.endsWith('data: [DONE]\n\n') || body.includes('"error"')) {
        failures.push(`${res.statusCode} ${body.slice(-200)}`);
      }
      completed++;
    }
  };
  const clients = Array.from({ length: 9 }, client);
  await waitFor(() => b.counters.requests > 3 && c.counters.requests > 3, { what: 'load on every backend' });

  const unchanged = registry.get(a.name)!;
  const unchangedSince = unchanged.lifecycle.snapshot.since;
  const oldGpu2 = registry.get('gpu2')!;
  const removedBackend = registry.get(b.name)!;
  await waitFor(() => removedBackend.inflight > 0 && oldGpu2.inflight > 0, {
    what: 'streams on the backends to remove',
  });

  const takenAfterReload = takesOf(registry, removedBackend);
  const answer = await reload({ backends: [entry(a), entry(d, 'gpu2'), entry(e)], health, min_ready: 2 });
  takenAfterReload.arm();
  // Requests the gateway sent to b just before the reload may still be on the wire, not yet counted.
  const bReachableAtReload = b.counters.requests + removedBackend.inflight;
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  assert.deepEqual(answer.body.added, [e.name]);
  assert.deepEqual(answer.body.removed, [b.name]);
  assert.deepEqual(answer.body.changed, ['gpu2']);
  assert.deepEqual(answer.body.unchanged, [a.name]);
  assert.deepEqual(answer.body.applied, ['min_ready']);
  assert.deepEqual(answer.body.restart_required, []);
  assert.equal(gateway.config.min_ready, 2);

  await waitFor(() => registry.get(b.name) === undefined, { what: 'removed backend gone once its streams finished' });
  assert.equal(removedBackend.inflight, 0);
  await waitFor(() => registry.get('gpu2')?.url === d.url && registry.get('gpu2')?.state === 'ready', {
    what: 'gpu2 replaced and admitted',
  });
  await waitFor(() => registry.get(e.name)?.state === 'ready', { what: 'added backend ready' });
  const dBefore = d.counters.requests;
  const eBefore = e.counters.requests;
  const cAfter = c.counters.requests;
  const done = completed;
  await waitFor(() => completed > done + 30, { what: 'load after the reload' });
  stop = true;
  await Promise.all(clients);

  assert.deepEqual(failures, [], 'no client saw a failure');
  assert.equal(takenAfterReload.count, 0, 'nothing new was sent to the removed backend');
  assert.ok(b.counters.requests <= bReachableAtReload, 'nothing new reached the removed backend');
  assert.equal(c.counters.requests, cAfter, 'the old gpu2 gets nothing once replaced');
  assert.ok(d.counters.requests > dBefore && e.counters.requests > eBefore, 'new backends get traffic');
  assert.equal(oldGpu2.removing, true);
  assert.equal(registry.get(a.name), unchanged, 'the unchanged backend is the same one');
  assert.equal(unchanged.state, 'ready');
  assert.equal(unchanged.lifecycle.snapshot.since, unchangedSince, 'its state history is kept');
});

test('an invalid new config is refused with the reason; the running config and fleet stay', async (t) => {
  const [a] = await createSims(t, [{}]);
  a.start();
  await a.whenReady();
  const first = { backends: [entry(a)], health };
  const { gateway, url, reload } = await startReloadable(t, first);
  await waitFor(() => gateway.fleet.registry.ready.length === 1, { what: 'ready' });
  const configBefore = JSON.stringify(gateway.config);
  const backendBefore = gateway.fleet.registry.get(a.name);

  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ backends: [entry(a), { url: 'http://10.0.0.1' }], health }, /backends\[1\]\.url: .* has no port/],
    [{ backends: [entry(a)], health: { ...health, rise: 0 } }, /health\.rise: expected an integer >= 1/],
    [{ backends: [entry(a)], min_ready: 3 }, /min_ready: 3 is more than the 1 configured backends/],
    [{ backends: [entry(a)], helth: {} }, /helth: unknown key \(did you mean "health"\?\)/],
  ];
  for (const [raw, reason] of cases) {
    const answer = await reload(raw);
    assert.equal(answer.status, 400);
    assert.match(answer.body.error?.message ?? '', /^config rejected, the running config stays: /);
    assert.match(answer.body.error?.message ?? '', reason);
    assert.match(answer.body.error?.message ?? '', /\(in reload-test\.yaml\)/);
    assert.equal(JSON.stringify(gateway.config), configBefore);
    assert.equal(gateway.fleet.registry.get(a.name), backendBefore);
    assert.equal(gateway.fleet.registry.size, 1);
  }
  const res = await request(`${url}/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ text: 'hi', sampling_params: { max_new_tokens: 2 } }),
  });
  assert.equal(res.statusCode, 200, 'still serving');
  await res.body.dump();
});

test('settings that need a restart are reported and keep their running value', async (t) => {
  const [a] = await createSims(t, [{}]);
  const { gateway, url, reload } = await startReloadable(t, { backends: [entry(a)] });
  const answer = await reload({
    backends: [entry(a)],
    listen: '127.0.0.1:1',
    health: { interval: '3s' },
    upstream: { headers_timeout: '10s' },
    auth: { api_keys: ['k1'] },
    admin: { token: 'new-token' },
  });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  assert.deepEqual(answer.body.unchanged, [a.name]);
  assert.deepEqual(answer.body.applied, ['auth.api_keys', 'admin.token']);
  assert.deepEqual(answer.body.restart_required, ['listen', 'health.interval', 'upstream.headers_timeout']);
  assert.equal(gateway.config.listen.port, 0, 'the listen address keeps its running value');
  assert.equal(gateway.config.health.interval, 10_000);
  assert.deepEqual(gateway.config.auth.api_keys, ['k1'], 'client keys apply at once');
  const guarded = await request(`${url}/v1/models`);
  await guarded.body.dump();
  assert.equal(guarded.statusCode, 401, 'the new client key is required at once');
});
