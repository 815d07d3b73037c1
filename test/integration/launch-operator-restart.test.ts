/** `fleetgate restart NAME` restarts a launched engine at once; a backend fleetgate did not start cannot be restarted (409). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startGateway } from '../helpers/fleet.js';
import { alive, runFleetgate, simCommand, startLaunch, waitReady } from '../helpers/launch.js';
import { waitFor } from '../helpers/wait.js';

test('fleetgate restart NAME: the engine is stopped and started again at once', async (t) => {
  const launched = await startLaunch(t, { launch: { command: simCommand(''), restart_backoff: '1m' } });
  await waitReady(launched, 'gpu0');
  const old = (await launched.backend('gpu0')).supervision?.pid;
  assert.ok(old);
  const run = await runFleetgate(['restart', 'gpu0', '--url', launched.url]);
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /^restarting gpu0: /);
  const after = await waitFor(
    async () => {
      const b = await launched.backend('gpu0');
      return b.state === 'ready' && b.supervision?.pid !== old && b.supervision?.pid ? b : null;
    },
    { what: 'gpu0 ready again with a new process', timeoutMs: 60_000 },
  );
  assert.equal(after.supervision?.restarts, 1);
  assert.ok(!alive(old), 'the old engine is gone');
  const metrics = await (await fetch(`${launched.url}/metrics`)).text();
  assert.match(metrics, /fleetgate_backend_restarts_total\{backend="gpu0",reason="operator"\} 1/);

  const unknown = await runFleetgate(['restart', 'gpu9', '--url', launched.url]);
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /404 no backend named "gpu9"/);
});

test('restart of a backend fleetgate did not start: 409', async (t) => {
  const { url } = await startGateway(t, { backends: [{ url: 'http://127.0.0.1:9', name: 'gpu0' }] });
  const res = await fetch(`${url}/fleet/backends/gpu0/restart`, { method: 'POST' });
  assert.equal(res.status, 409);
  const body = (await res.json()) as { error: { message: string } };
  assert.match(body.error.message, /was not started by fleetgate launch/);
});
