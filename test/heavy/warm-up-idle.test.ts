/**
 * As shipped, with the start-up warm-up on (its default), idle for 30 s: engines get only the probes
 * and the load scrape docs/operations.md lists, at their documented rates (the rest of the warm-up's
 * symptoms: test/integration/warm-up-engines.test.ts).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createSims } from '../helpers/fleet.js';
import { HEAVY } from '../helpers/heavy.js';
import { startShipped } from '../helpers/shipped.js';
import { waitFor } from '../helpers/wait.js';

test(
  'idle for 30 s as shipped (warm-up on): engines get only the documented probes and load scrape',
  HEAVY,
  async (t) => {
    const sims = await createSims(t, [{}, {}, {}]);
    for (const sim of sims) sim.start();
    await Promise.all(sims.map((sim) => sim.whenReady()));
    const backends = sims.map((sim) => ({ url: sim.url, name: sim.name }));
    const defaults = { health: { interval: '10s', starting_interval: '1s', timeout: '5s' } };
    const { gateway, url } = await startShipped(t, 'shipped', backends, defaults);
    await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, { what: '/readyz 200' });
    assert.ok(gateway.config.upstream.warm_up, 'the shipped config warms up');
    const started = Date.now();
    await waitFor(() => Date.now() - started >= 30_000, { timeoutMs: 35_000, intervalMs: 500, what: '30 s idle' });
    const seconds = (Date.now() - started) / 1000 + 2;
    for (const sim of sims) {
      const { byPath, requests } = sim.counters;
      assert.equal(requests, 0, `${sim.name} got no inference request: ${JSON.stringify(byPath)}`);
      assert.deepEqual(
        Object.keys(byPath).filter((path) => !['/health', '/model_info', '/metrics', '/server_info'].includes(path)),
        [],
        `${sim.name}: only documented paths`,
      );
      // docs/operations.md: /metrics every load_interval (250 ms); /health and /model_info once per
      // probe (1 s while starting, 10 s when ready); /server_info once per admission.
      assert.ok(byPath['/metrics'] <= seconds / 0.25 + 2, `${sim.name} /metrics ${byPath['/metrics']}`);
      assert.ok(byPath['/health'] <= seconds / 10 + 3, `${sim.name} /health ${byPath['/health']}`);
      assert.ok((byPath['/server_info'] ?? 0) <= 1, `${sim.name} /server_info ${byPath['/server_info']}`);
    }
  },
);
