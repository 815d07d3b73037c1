/**
 * `fleetgate batch` through a fleet that loses engines mid-job: one crashes (connections dropped),
 * one hangs (accepts, never answers). fleetgate re-sends what they held and the batch retries what
 * came back failed: every request ends in the output, none in the errors file.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { assertCompleteOutput, readJsonl, tempDir, writeChatInput } from '../helpers/batch.js';
import { spawnCli } from '../helpers/cli.js';
import { startReadyFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

const COUNT = 5000;
const fastEngine = { engine: { tokenMs: 1, maxRunningRequests: 64 } };

test('one engine killed and one hung mid-job: 5,000/5,000 answered, 0 in the errors file', async (t) => {
  const dir = tempDir(t);
  const input = writeChatInput(dir, COUNT);
  const output = join(dir, 'output.jsonl');
  const { url, gateway, sims } = await startReadyFleet(t, [fastEngine, fastEngine, fastEngine, fastEngine], {
    log: { access: false },
    // The progress watchdog ejects the hung engine and ends (re-sends) what it holds; probes at their
    // default pace would mark it unhealthy only later.
    health: { progress_timeout: '1s' },
  });

  const run = spawnCli(['batch', input, '-o', output, '--url', url]);
  t.after(() => run.child.kill('SIGKILL'));
  // Each request streams upstream (batch.stream_upstream): about twice the proxy's work per short
  // answer, so on a loaded 2-core machine a quarter takes longer than it did non-streamed.
  await waitFor(() => readJsonl(output).length >= COUNT * 0.25, {
    timeoutMs: 150_000,
    intervalMs: 50,
    what: 'a quarter written',
  });
  await sims[0].crash();
  sims[1].hang();
  await waitFor(() => gateway.fleet.registry.ready.length === 2, {
    timeoutMs: 20_000,
    what: 'both faulty engines out',
  });
  const code = await run.closed;
  assert.equal(code, 0, run.output());
  assertCompleteOutput(readJsonl(output), COUNT);
  assert.equal(readJsonl(join(dir, 'output.errors.jsonl')).length, 0, 'no errors');
  assert.ok((sims[1].counters.byPath['/v1/chat/completions'] ?? 0) > 0, 'the hung engine had taken requests');
});
