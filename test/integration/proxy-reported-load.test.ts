/**
 * Backend-reported load: a backend busy with work from elsewhere (another fleetgate replica, a
 * direct client) reports it in its /metrics, and least-loaded sends new requests to the idle one.
 * With in-flight counts alone, both look idle to this replica and would share evenly (herding).
 */

import assert from 'node:assert/strict';
import { setMaxListeners } from 'node:events';
import { test } from 'node:test';
import { request } from 'undici';
import { startReadyFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

async function run(t: Parameters<typeof startReadyFleet>[0], loadInterval: string): Promise<number[]> {
  const { url, gateway, sims } = await startReadyFleet(t, [{ engine: { tokenMs: 20 } }, { engine: { tokenMs: 20 } }], {
    routing: { load_interval: loadInterval },
  });

  // Another replica's traffic: 16 long streams straight to gpu0.
  const elsewhere = new AbortController();
  // One signal for the 16 requests: more listeners than Node's default warning threshold, on purpose.
  setMaxListeners(32, elsewhere.signal);
  t.after(() => elsewhere.abort());
  for (let i = 0; i < 16; i++) {
    void request(`${sims[0].url}/generate`, {
      method: 'POST',
      body: JSON.stringify({ text: 'x', stream: true, sampling_params: { max_new_tokens: 400 } }),
      signal: elsewhere.signal,
    })
      .then((res) => res.body.text())
      .catch(() => {});
  }
  await waitFor(() => sims[0].counters.requests === 16, { what: 'outside load on gpu0' });
  if (loadInterval !== '0') {
    await waitFor(() => (gateway.fleet.registry.get(sims[0].name)?.reported?.running ?? 0) >= 16, {
      what: 'gpu0 to report its load',
    });
  }
  const before = sims.map((s) => s.counters.requests);
  for (let i = 0; i < 4; i++) {
    const res = await request(`${url}/generate`, {
      method: 'POST',
      body: JSON.stringify({ text: 'y', sampling_params: { max_new_tokens: 2 } }),
    });
    await res.body.text();
  }
  elsewhere.abort();
  return sims.map((s, i) => s.counters.requests - before[i]);
}

test('least-loaded uses the load backends report, so replicas do not herd', async (t) => {
  const [busy, idle] = await run(t, '50ms');
  assert.deepEqual([busy, idle], [0, 4], 'every new request went to the idle backend');
});

test('without reported load (load_interval 0) this replica cannot tell, and sends to the busy one too', async (t) => {
  const [busy, idle] = await run(t, '0');
  assert.ok(busy >= 1, `split ${busy}/${idle}`);
});
