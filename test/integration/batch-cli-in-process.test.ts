/**
 * `fleetgate batch --serve` and `--launch`: the batch runs through a fleetgate built in its own
 * process (no `fleetgate serve` running anywhere), which waits for the backends to be ready, sends
 * every request over real TCP to the simulated engines, and stops at the end: the command exits 0
 * by itself (with `auth.api_keys` set, the batch's requests carry the first key), and under `--launch` no process of any engine it started (nor an engine's own child,
 * which ignores SIGTERM) is left running.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { assertCompleteOutput, generationRequests, readJsonl, tempDir, writeChatInput } from '../helpers/batch.js';
import { type CliProcess, spawnCli } from '../helpers/cli.js';
import { createSims } from '../helpers/fleet.js';
import { alive, simWithChildCommand } from '../helpers/launch.js';
import { freePorts } from '../helpers/net.js';
import { waitFor } from '../helpers/wait.js';

const COUNT = 300;

/** The command's exit code, once it exited by itself (bounded: a gateway left open would hold it). */
async function exited(run: CliProcess): Promise<number | null> {
  await waitFor(() => run.child.exitCode !== null || run.child.signalCode !== null, {
    timeoutMs: 90_000,
    intervalMs: 100,
    what: `fleetgate batch to exit: ${run.output()}`,
  });
  return run.closed;
}

test('--serve: fleetgate in the batch process, backends waited for, 300/300 answered, exits 0', async (t) => {
  const dir = tempDir(t);
  const input = writeChatInput(dir, COUNT);
  const output = join(dir, 'output.jsonl');
  const sims = await createSims(
    t,
    [{}, {}, {}].map(() => ({ engine: { tokenMs: 1, maxRunningRequests: 16 } })),
  );
  for (const sim of sims) sim.start();

  const run = spawnCli([
    'batch',
    input,
    '-o',
    output,
    '--serve',
    '--backend',
    sims.map((sim) => sim.url).join(','),
    '--ready',
    'all',
    '--set',
    'health.starting_interval=100ms',
    // Its own key check applies to the batch's requests: they carry the first key.
    '--set',
    'auth.api_keys=[batch-secret, other]',
  ]);
  t.after(() => run.child.kill('SIGKILL'));
  const code = await exited(run);
  assert.equal(code, 0, run.output());
  assertCompleteOutput(readJsonl(output), COUNT);
  assert.equal(generationRequests(sims), COUNT, 'every request reached a simulated engine once');
  assert.equal(readJsonl(join(dir, 'output.errors.jsonl')).length, 0, 'no errors');
  assert.match(run.stderr(), new RegExp(`${COUNT}/${COUNT} done`));
  assert.doesNotMatch(run.stderr(), /"msg":"request completed"/, 'no access log by default');
});

test('--launch: engines started, 300/300 answered, every engine process (and its child) gone at exit', async (t) => {
  const dir = tempDir(t);
  const input = writeChatInput(dir, COUNT);
  const output = join(dir, 'output.jsonl');
  const ports = await freePorts(2);
  const config = join(dir, 'fleetgate.yaml');
  writeFileSync(
    config,
    JSON.stringify({
      health: { starting_interval: '100ms', interval: '500ms' },
      launch: {
        command: simWithChildCommand(''),
        ports,
        log: join(dir, 'logs/sglang_{name}.log'),
        stop_grace: '1s',
      },
    }),
  );
  const pids: number[] = [];
  t.after(() => {
    for (const pid of pids) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {}
    }
  });

  const run = spawnCli(['batch', input, '-o', output, '--launch', '--config', config, '--log-level', 'info']);
  t.after(() => run.child.kill('SIGKILL'));
  const code = await exited(run);
  pids.push(...[...run.stderr().matchAll(/started \(pid (\d+)\)/g)].map((m) => Number(m[1])));
  assert.equal(code, 0, run.output());
  assertCompleteOutput(readJsonl(output), COUNT);
  assert.equal(pids.length, 2, `two engines started: ${run.stderr()}`);

  const children = ['gpu0', 'gpu1'].map((name) => {
    const log = readFileSync(join(dir, `logs/sglang_${name}.log`), 'utf8');
    return Number(/child pid (\d+)/.exec(log)?.[1]);
  });
  for (const pid of [...pids, ...children]) {
    assert.ok(pid > 0, 'a pid');
    assert.equal(alive(pid), false, `process ${pid} is gone after fleetgate batch exited`);
  }
});
