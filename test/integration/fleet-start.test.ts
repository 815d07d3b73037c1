/**
 * `new Fleet()` does no I/O; `start()` starts it. Two fleets watch the same backend (a loopback port
 * that refuses connections): only the started one probes, however long it has been probing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { validateConfig } from '../../src/config/validate.js';
import { Fleet } from '../../src/fleet/fleet.js';
import { waitFor } from '../helpers/wait.js';

test('a fleet probes only once started, and stops probing when stopped', async (t) => {
  const config = validateConfig(
    {
      backends: [{ url: 'http://127.0.0.1:9', name: 'refusing' }],
      health: { interval: '20ms', starting_interval: '20ms' },
      routing: { load_interval: '20ms' },
    },
    'test',
  );
  const idle = new Fleet(config);
  const started = new Fleet(config);
  t.after(() => Promise.all([idle.stop(), started.stop()]));
  let idleProbes = 0;
  let startedProbes = 0;
  idle.registry.on('probe', () => idleProbes++);
  started.registry.on('probe', () => startedProbes++);

  assert.equal(idle.registry.size, 1, 'the configured backend is registered at construction');
  started.start();
  await waitFor(() => startedProbes >= 3, { what: 'three probes by the started fleet' });
  assert.equal(idleProbes, 0, 'the fleet never started has probed nothing');

  await started.stop();
  const afterStop = startedProbes;
  idle.start();
  await waitFor(() => idleProbes >= 3, { what: 'three probes by the other fleet, once started' });
  assert.equal(startedProbes, afterStop, 'the stopped fleet probed no more meanwhile');
});
