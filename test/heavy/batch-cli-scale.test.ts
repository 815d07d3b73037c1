/**
 * `fleetgate batch` at a real job's size: it resumes from an output larger than 512 MiB (a string
 * cannot hold it: read whole, the ledger could not be opened) and sends only the missing requests;
 * a bad line at 999,990 of a 1,000,000-line input is refused before anything is sent. The batch
 * process's peak resident set stays under 256 MB in both.
 */
import assert from 'node:assert/strict';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { generationRequests, tempDir } from '../helpers/batch.js';
import {
  assertCompleteOutputStreamed,
  promptLineOf,
  watchPeakRss,
  writeAnsweredOutput,
  writeLines,
} from '../helpers/batch-files.js';
import { spawnCli } from '../helpers/cli.js';
import { startReadyFleet } from '../helpers/fleet.js';
import { HEAVY } from '../helpers/heavy.js';

const MB = 1e6;
/** The bound for the batch process (a run under tsx, whose loader adds ~30 MB). */
const RSS_BOUND = 256 * MB;
const fastEngine = { engine: { tokenMs: 0, maxRunningRequests: 128 } };

test('resume from a 600 MiB output: only the missing requests are sent, each custom_id once', HEAVY, async (t) => {
  const dir = tempDir(t);
  const COUNT = 3000;
  const DONE = 2000;
  const input = join(dir, 'input.jsonl');
  const output = join(dir, 'output.jsonl');
  await writeLines(input, COUNT, promptLineOf(200));
  const whole = await writeAnsweredOutput(output, DONE, 600 * 2 ** 20);
  assert.ok(whole > 512 * 2 ** 20, `an output over 512 MiB (${whole} bytes)`);
  assert.ok(statSync(output).size > whole, 'a torn last line after the whole ones');
  const { url, sims } = await startReadyFleet(t, [fastEngine, fastEngine], { log: { access: false } });

  const run = spawnCli(['batch', input, '-o', output, '--url', url]);
  t.after(() => run.child.kill('SIGKILL'));
  const rss = watchPeakRss(run.child.pid as number);
  const code = await run.closed;
  const peak = rss.stop();
  assert.equal(code, 0, run.output());
  assert.match(
    run.stderr(),
    new RegExp(`resuming .*: ${DONE} of ${COUNT} already written; dropped a torn last line of \\d+ bytes`),
  );
  assert.equal(generationRequests(sims), COUNT - DONE, 'the engines received only the missing requests');
  await assertCompleteOutputStreamed(output, COUNT);
  t.diagnostic(`batch process peak RSS ${(peak / MB).toFixed(0)} MB`);
  assert.ok(peak > 0 && peak < RSS_BOUND, `peak RSS ${(peak / MB).toFixed(0)} MB < 256 MB`);
});

test('a bad line at 999,990 of 1,000,000: exit 2 naming it, nothing sent, bounded memory', HEAVY, async (t) => {
  const dir = tempDir(t);
  const COUNT = 1_000_000;
  const BAD = 999_990;
  const input = join(dir, 'input.jsonl');
  const output = join(dir, 'output.jsonl');
  const good = promptLineOf(100);
  await writeLines(input, COUNT, (i) => (i + 1 === BAD ? good(i).slice(0, -3) : good(i)));
  const { url, sims } = await startReadyFleet(t, [fastEngine]);

  const run = spawnCli(['batch', input, '-o', output, '--url', url]);
  t.after(() => run.child.kill('SIGKILL'));
  const rss = watchPeakRss(run.child.pid as number);
  const code = await run.closed;
  const peak = rss.stop();
  assert.equal(code, 2, run.output());
  assert.match(run.stderr(), new RegExp(`input.jsonl: line ${BAD}: not valid JSON`));
  assert.match(run.stderr(), /nothing was sent/);
  assert.equal(sims[0].counters.requests, 0, 'the engine received no request');
  assert.equal(existsSync(output), false, 'no output file');
  t.diagnostic(
    `input ${(statSync(input).size / MB).toFixed(0)} MB, batch process peak RSS ${(peak / MB).toFixed(0)} MB`,
  );
  assert.ok(peak > 0 && peak < RSS_BOUND, `peak RSS ${(peak / MB).toFixed(0)} MB < 256 MB`);
});
