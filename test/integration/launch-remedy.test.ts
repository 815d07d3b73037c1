/**
 * An engine that fails with `Not enough memory` is restarted with the remedy applied: the new process's
 * argv (/proc/PID/cmdline) has the lowered --mem-fraction-static, and the status shows the change.
 * The sim fails only above --fail-if-mem-fraction-above, so the remedy really fixes it.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { simCommand, startLaunch } from '../helpers/launch.js';
import { sampleValue } from '../helpers/prometheus-text.js';
import { waitFor } from '../helpers/wait.js';

test('not_enough_memory: restarted with --mem-fraction-static lowered by the remedy, then ready', async (t) => {
  const fleetgate = await startLaunch(t, {
    launch: {
      // The start delay keeps the failing process alive long enough to read its argv.
      command: simCommand(
        '--start-delay 1s --fail 0:not_enough_memory --mem-fraction-static 0.88 --fail-if-mem-fraction-above 0.85',
      ),
      restart_backoff: '1s',
      remedies: [
        { when: 'Not enough memory|CUDA out of memory', set: { '--mem-fraction-static': { step: -0.05, min: 0.6 } } },
      ],
    },
  });
  const first = await waitFor(async () => (await fleetgate.backend('gpu0')).supervision?.pid, { what: 'a pid' });
  const firstArgv = readFileSync(`/proc/${first}/cmdline`, 'utf8').split('\0');
  assert.equal(firstArgv[firstArgv.indexOf('--mem-fraction-static') + 1], '0.88');

  const ready = await waitFor(
    async () => {
      const b = await fleetgate.backend('gpu0');
      return b.state === 'ready' ? b : null;
    },
    { what: 'gpu0 ready after the remedy', timeoutMs: 60_000 },
  );
  assert.equal(ready.supervision?.restarts, 1);
  assert.equal(ready.supervision?.remedy, '--mem-fraction-static 0.88 -> 0.83');
  const pid = ready.supervision?.pid;
  assert.ok(pid && pid !== first);
  const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  assert.equal(argv[argv.indexOf('--mem-fraction-static') + 1], '0.83', 'the new process runs with the remedy');
  assert.match(fleetgate.output(), /remedy applied: --mem-fraction-static 0.88 -> 0.83/, 'and it is logged');

  const log = readFileSync(`${fleetgate.dir}/logs/sglang_gpu0.log`, 'utf8');
  assert.match(
    log,
    /Not enough memory[\s\S]*The server is fired up and ready to roll!/,
    'both runs appended to one log',
  );

  const metrics = await (await fetch(`${fleetgate.url}/metrics`)).text();
  const restarts = ['exit', 'failed'].map(
    (reason) => sampleValue(metrics, 'fleetgate_backend_restarts_total', { backend: 'gpu0', reason }) ?? 0,
  );
  assert.equal(restarts[0] + restarts[1], 1, 'one restart, for the exit or the fatal line, whichever came first');
});
