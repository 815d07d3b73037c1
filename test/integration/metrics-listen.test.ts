/** `metrics_listen`: /metrics also served on its own address (e.g. for a scrape-only network). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Agent, request } from 'undici';
import { backendsFor, createSims, startGateway } from '../helpers/fleet.js';
import { sampleValue } from '../helpers/prometheus-text.js';
import { waitFor } from '../helpers/wait.js';

test('metrics_listen serves /metrics on a separate address and closes with the gateway', async (t) => {
  const sims = await createSims(t, [{}]);
  sims[0].start();
  const { gateway } = await startGateway(t, {
    backends: backendsFor(sims),
    metrics_listen: '127.0.0.1:0',
    health: { starting_interval: '50ms' },
  });
  const metricsUrl = gateway.metrics.url;
  assert.ok(metricsUrl, 'the metrics listener is up');

  await waitFor(
    async () => {
      const res = await request(`${metricsUrl}/metrics`);
      const text = await res.body.text();
      assert.equal(res.statusCode, 200);
      assert.match(String(res.headers['content-type']), /^text\/plain/);
      return sampleValue(text, 'fleetgate_backend_up', { backend: 'gpu0' }) === 1;
    },
    { what: 'gpu0 up on the metrics listener' },
  );

  const other = await request(`${metricsUrl}/fleet/status`);
  await other.body.dump();
  assert.equal(other.statusCode, 404, 'only /metrics is served there');

  await gateway.close();
  // A fresh connection: the kept-alive one above may not have seen the server's FIN yet.
  const fresh = new Agent();
  t.after(() => fresh.close());
  await assert.rejects(request(`${metricsUrl}/metrics`, { dispatcher: fresh }), /ECONNREFUSED/);
});
