/** `hang_capture`: the start stalls, and after health.stall_after the engine's group is killed and started again. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { alive, simCommand, startLaunch } from '../helpers/launch.js';
import { sampleValue } from '../helpers/prometheus-text.js';
import { waitFor } from '../helpers/wait.js';

test('a start that stalls past health.stall_after is killed and restarted', async (t) => {
  const fleetgate = await startLaunch(t, {
    launch: { command: simCommand('--fail 0:hang_capture:1') },
    config: { health: { starting_interval: '100ms', stall_after: '1500ms' } },
  });
  const first = await waitFor(
    async () => {
      const b = await fleetgate.backend('gpu0');
      return b.phase === 'capturing_cuda_graphs' ? b.supervision?.pid : null;
    },
    { what: 'gpu0 capturing CUDA graphs', timeoutMs: 60_000 },
  );
  const restarted = await waitFor(
    async () => {
      const b = await fleetgate.backend('gpu0');
      return (b.supervision?.restarts ?? 0) >= 1 ? b : null;
    },
    { what: 'a restart', timeoutMs: 60_000 },
  );
  // fleetgate's own log times: the stall is acted on no sooner than stall_after after the engine started.
  const logTime = (pattern: RegExp) => {
    const line = fleetgate
      .output()
      .split('\n')
      .find((l) => pattern.test(l));
    if (line === undefined) throw new Error(`no ${pattern} in ${fleetgate.output()}`);
    return (JSON.parse(line) as { time: number }).time;
  };
  const stalledAfter = logTime(/stalled: stopping it/) - logTime(/engine gpu0 started/);
  assert.ok(stalledAfter >= 1_500, `stopped ${stalledAfter} ms after the start, not before stall_after`);
  await waitFor(() => !alive(first), { what: 'the stalled process gone' });
  await waitFor(async () => (await fleetgate.backend('gpu0')).supervision?.pid, { what: 'a new pid' });
  assert.notEqual((await fleetgate.backend('gpu0')).supervision?.pid, first);
  assert.ok(restarted.supervision?.last_exit, 'the stop is recorded');
  assert.match(fleetgate.output(), /stalled: stopping it for a restart/);
  const metrics = await (await fetch(`${fleetgate.url}/metrics`)).text();
  assert.ok(
    (sampleValue(metrics, 'fleetgate_backend_restarts_total', { backend: 'gpu0', reason: 'stalled' }) ?? 0) >= 1,
  );
});
