/**
 * `fleetgate launch` with an engine that prints a real start-up failure log (vllm#12865: a logged
 * traceback ending in `ValueError: The model's max seq len (131072) is larger than ... KV cache`,
 * then a bare one, no crash head) and exits: the exit turns that final exception into the failure,
 * so the backend is `failed` with it as reason and the remedy matching it is applied before the
 * restart. Without the suspect verdict the reason would be only `exited with code 0`.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { REPO } from '../helpers/cli-entry.js';
import { startLaunch } from '../helpers/launch.js';
import { waitFor } from '../helpers/wait.js';

const FIXTURE = join(REPO, 'test/fixtures/logs/vllm-12865-v0-max-seq-len-valueerror.log');
/** Prints the excerpt on stdout (the engine's log) and exits; the flags are the remedy's to change. */
const ENGINE = `${process.execPath} -e process.stdout.write(require(\`fs\`).readFileSync(process.argv[1])) ${FIXTURE} --gpu-memory-utilization 0.9`;

test('an engine exits after a bare ValueError traceback: failed with it, and the remedy applies', async (t) => {
  const fleetgate = await startLaunch(t, {
    launch: {
      command: ENGINE,
      kind: 'vllm',
      restart_backoff: '1s',
      max_restarts: 2,
      remedies: [{ when: 'max seq len', set: { '--gpu-memory-utilization': { step: 0.05, max: 0.95 } } }],
    },
  });
  const restarted = await waitFor(
    async () => {
      const b = await fleetgate.backend('gpu0');
      return (b.supervision?.restarts ?? 0) >= 1 && b.supervision?.remedy ? b : null;
    },
    { what: 'a restart with the remedy', timeoutMs: 30_000 },
  );
  assert.equal(restarted.supervision?.remedy, '--gpu-memory-utilization 0.9 -> 0.95');
  assert.match(fleetgate.output(), /remedy applied: --gpu-memory-utilization 0.9 -> 0.95/);
  const failed = await waitFor(
    async () => {
      const b = await fleetgate.backend('gpu0');
      return b.state === 'failed' ? b : null;
    },
    { what: 'gpu0 failed', timeoutMs: 30_000 },
  );
  assert.match(failed.reason ?? '', /ValueError: The model's max seq len \(131072\) is larger than/);
});
