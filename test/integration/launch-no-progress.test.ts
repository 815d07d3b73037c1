/**
 * The hook for the progress watchdog: a launched engine that fleetgate marks `unhealthy` with a reason
 * about progress (while its HTTP still answers) is stopped and restarted, counted as `no_progress`.
 * The watchdog is stood in for by the registry event it would cause; the engine is a real process.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { createGateway } from '../../src/app.js';
import { validateConfig } from '../../src/config/validate.js';
import { alive, simCommand } from '../helpers/launch.js';
import { freePort } from '../helpers/net.js';
import { waitFor } from '../helpers/wait.js';

test('unhealthy for lack of progress: the engine is restarted', async (t) => {
  const port = await freePort();
  const config = validateConfig(
    {
      listen: '127.0.0.1:0',
      health: { starting_interval: '100ms', fall: 1 },
      launch: {
        command: simCommand(''),
        ports: port,
        log: `/tmp/fleetgate-no-progress-${port}.log`,
        restart_backoff: '200ms',
      },
    },
    'test',
  );
  const gateway = await createGateway(config, { logger: pino({ level: 'silent' }), launch: true });
  t.after(() => gateway.close());
  await gateway.listen();
  const registry = gateway.fleet.registry;
  const backend = await waitFor(() => registry.ready.find((b) => b.name === 'gpu0'), {
    what: 'gpu0 ready',
    timeoutMs: 60_000,
  });
  const first = backend.supervision?.pid;
  assert.ok(first);
  const restarts: string[] = [];
  registry.on('restart', (_b, reason) => restarts.push(reason));

  registry.apply(backend, {
    type: 'probe',
    result: { ok: false, reachable: true, reason: 'no progress for 120s with 4 requests running' },
  });
  assert.equal(backend.state, 'unhealthy');
  await waitFor(() => restarts.length > 0, { what: 'a restart', timeoutMs: 30_000 });
  assert.deepEqual(restarts, ['no_progress']);
  await waitFor(() => !alive(first), { what: 'the old engine gone' });
  await waitFor(() => backend.state === 'ready' && backend.supervision?.pid !== first, {
    what: 'ready again with a new process',
    timeoutMs: 60_000,
  });
});

test('unhealthy for another reason (a refused connection) is left to heal: no restart', async (t) => {
  const port = await freePort();
  const config = validateConfig(
    {
      listen: '127.0.0.1:0',
      health: { starting_interval: '100ms', fall: 1 },
      launch: { command: simCommand(''), ports: port, log: `/tmp/fleetgate-no-progress-${port}.log` },
    },
    'test',
  );
  const gateway = await createGateway(config, { logger: pino({ level: 'silent' }), launch: true });
  t.after(() => gateway.close());
  await gateway.listen();
  const registry = gateway.fleet.registry;
  const backend = await waitFor(() => registry.ready.find((b) => b.name === 'gpu0'), {
    what: 'gpu0 ready',
    timeoutMs: 60_000,
  });
  const restarts: string[] = [];
  registry.on('restart', (_b, reason) => restarts.push(reason));
  registry.apply(backend, { type: 'probe', result: { ok: false, reachable: true, reason: '/health 503' } });
  assert.equal(backend.state, 'unhealthy');
  await waitFor(() => backend.state === 'ready', { what: 'ready again by itself' });
  assert.deepEqual(restarts, []);
  assert.equal(backend.supervision?.restarts, 0);
});
