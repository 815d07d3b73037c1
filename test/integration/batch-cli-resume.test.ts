/**
 * `fleetgate batch` resumes from its output file: a 5,000-request job, the batch process SIGKILLed
 * at a random point and started again, ends with exactly 5,000 distinct custom_ids, each a valid
 * answer, and the simulated engines together received no more than 5,000 plus the requests that
 * were in flight at the kill (received, never written).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { assertCompleteOutput, generationRequests, readJsonl, tempDir, writeChatInput } from '../helpers/batch.js';
import { spawnCli } from '../helpers/cli.js';
import { startReadyFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

const COUNT = 5000;

/** `count()` once it gave the same value 5 times in a row, 200 ms apart (bounded by 30 s). */
async function settledCount(count: () => number): Promise<number> {
  let last = -1;
  let same = 0;
  return waitFor(
    () => {
      const now = count();
      same = now === last ? same + 1 : 0;
      last = now;
      return same >= 4 ? now + 1 : 0;
    },
    { timeoutMs: 30_000, intervalMs: 200, what: 'the engines’ count to settle' },
  ).then((n) => n - 1);
}
const fastEngine = { engine: { tokenMs: 1, maxRunningRequests: 64 } };

test('SIGKILL mid-job, run again: 5,000 distinct answers, no request sent twice beyond those in flight', async (t) => {
  const dir = tempDir(t);
  const input = writeChatInput(dir, COUNT);
  const output = join(dir, 'output.jsonl');
  const { url, gateway, sims } = await startReadyFleet(t, [fastEngine, fastEngine, fastEngine], {
    log: { access: false },
  });

  const killAt = Math.floor(COUNT * (0.15 + Math.random() * 0.6));
  const first = spawnCli(['batch', input, '-o', output, '--url', url]);
  t.after(() => first.child.kill('SIGKILL'));
  await waitFor(() => readJsonl(output).length >= killAt, {
    timeoutMs: 60_000,
    intervalMs: 50,
    what: `${killAt} lines written`,
  });
  first.child.kill('SIGKILL');
  assert.equal(await first.closed, null, 'killed by the signal');
  // The requests it left in flight finish at the engines; then count what they received. A request
  // fleetgate took just before the kill can still be on its way to an engine when fleetgate's counts
  // are back to 0, so the engines' count must also hold still for a while.
  await waitFor(() => gateway.fleet.registry.list().every((b) => b.inflight === 0) && gateway.queue.waiting === 0, {
    timeoutMs: 30_000,
    what: 'in-flight requests done',
  });
  const receivedAtKill = await settledCount(() => generationRequests(sims));
  const writtenAtKill = readJsonl(output).length;
  const inFlightAtKill = receivedAtKill - writtenAtKill;
  assert.ok(writtenAtKill < COUNT, `killed before the end (${writtenAtKill} written)`);
  t.diagnostic(`killed at ${writtenAtKill} written, ${inFlightAtKill} in flight`);

  const second = spawnCli(['batch', input, '-o', output, '--url', url]);
  t.after(() => second.child.kill('SIGKILL'));
  const code = await second.closed;
  assert.equal(code, 0, second.output());
  assert.match(second.stderr(), new RegExp(`resuming .*: ${writtenAtKill} of ${COUNT} already written`));

  assertCompleteOutput(readJsonl(output), COUNT);
  const received = generationRequests(sims);
  t.diagnostic(`engines received ${received} generation requests for ${COUNT}`);
  assert.ok(
    received <= COUNT + inFlightAtKill,
    `engines received ${received}, at most ${COUNT} + ${inFlightAtKill} in flight at the kill`,
  );
  assert.equal(readJsonl(join(dir, 'output.errors.jsonl')).length, 0, 'no errors');
});
