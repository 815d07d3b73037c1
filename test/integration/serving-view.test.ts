/**
 * The serving view in `GET /fleet/status`, after real traffic through fleetgate to simulated
 * servers: last-minute rates per backend and for the fleet, the load each backend reports, the
 * straggler mark on a slowed backend, and the fleet's waiting requests, retries and errors.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import type { FleetStatus } from '../../src/admin/fleet-summary.js';
import { chat, chatLoad } from '../helpers/chat-load.js';
import { createSims, startGateway, startReadyFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

async function status(url: string): Promise<FleetStatus> {
  const res = await request(`${url}/fleet/status`);
  assert.equal(res.statusCode, 200);
  return (await res.body.json()) as FleetStatus;
}

test('under load: rates and reported load per backend, fleet totals, and the slowed backend marked a straggler', async (t) => {
  const { url, sims } = await startReadyFleet(t, [{ engine: { tokenMs: 10 } }, { engine: { tokenMs: 10 } }], {
    routing: { load_interval: '100ms' },
  });
  sims[1].slow(20);
  const clients = chatLoad(url, { workers: 8, maxTokens: 12 });
  t.after(() => clients.stop());

  const marked = await waitFor(
    async () => {
      const s = await status(url);
      const [fast, slow] = s.backends.map((b) => b.serving);
      return slow?.straggler && fast!.requests_per_second > 0 && slow.requests_per_second > 0 ? s : null;
    },
    { timeoutMs: 30_000, intervalMs: 250, what: 'gpu1 marked a straggler, once both answered requests' },
  );
  const [fast, slow] = marked.backends.map((b) => b.serving!);
  assert.equal(fast.straggler, false);
  for (const b of [fast, slow]) {
    assert.ok(b.requests_per_second > 0, JSON.stringify(b));
    assert.ok(b.tokens_per_second > 0, JSON.stringify(b));
    assert.equal(typeof b.running, 'number', 'the backend reports its running requests');
    assert.equal(typeof b.queued, 'number');
    assert.equal(typeof b.kv_cache_usage, 'number');
  }
  assert.ok(
    slow.tokens_per_second_per_request! < 0.7 * fast.tokens_per_second_per_request!,
    `per request: slow ${slow.tokens_per_second_per_request} fast ${fast.tokens_per_second_per_request}`,
  );
  const fleet = marked.serving!;
  assert.equal(fleet.window_seconds, 60);
  assert.ok(fleet.requests_per_second > 0);
  assert.ok(Math.abs(fleet.tokens_per_second - (fast.tokens_per_second + slow.tokens_per_second)) < 0.2);
  assert.equal(fleet.errors, 0);
  assert.equal(fleet.retries, 0);

  await clients.stop();
  assert.ok(clients.statuses.length > 0 && clients.statuses.every((s) => s === 200));
});

test('a request waiting in fleetgate is counted as waiting, and its 503 as an error', async (t) => {
  const [sim] = await createSims(t, [{}]);
  const { url } = await startGateway(t, {
    backends: [{ url: sim.url, name: sim.name }],
    queue: { timeout: '1500ms' },
  });
  const answer = chat(url, 4);
  const waiting = await waitFor(
    async () => {
      const s = await status(url);
      return s.serving!.waiting === 1 ? s : null;
    },
    { what: 'one request waiting' },
  );
  assert.equal(waiting.serving!.errors, 0);
  assert.equal((await answer).status, 503);
  const after = await waitFor(
    async () => {
      const s = await status(url);
      return s.serving!.errors === 1 ? s : null;
    },
    { what: 'the 503 counted' },
  );
  assert.equal(after.serving!.waiting, 0);
  assert.ok(after.serving!.requests_per_second > 0);
  assert.equal(after.backends[0].serving!.requests_per_second, 0, 'it reached no backend');
});

test('a request re-sent after a refused connection is counted as a retry, not an error', async (t) => {
  const { url, sims } = await startReadyFleet(t, [{}, {}], {
    routing: { policy: 'round-robin' },
    health: { interval: '60s' },
  });
  await sims[1].stop();
  for (let i = 0; i < 4; i++) assert.equal((await chat(url, 4)).status, 200);
  const s = await status(url);
  assert.ok(s.serving!.retries >= 1, JSON.stringify(s.serving));
  assert.equal(s.serving!.errors, 0);
});
