/**
 * The CLI as a new user tries it: `--help` and `-h` on every verb exit 0 with its usage, `--version`
 * prints package.json's version, and `demo` piped into a file writes no colour codes unless forced.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { freePort, freePortRange } from '../helpers/net.js';
import { waitFor } from '../helpers/wait.js';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The environment without colour switches, so a test sets the ones it is about. */
function plainEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const { FORCE_COLOR: _force, NO_COLOR: _no, ...env } = process.env;
  return { ...env, ...extra };
}

function fleetgate(args: string[]): Promise<Run> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/index.ts', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: plainEnv(),
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}

const VERBS = ['serve', 'status', 'wait', 'drain', 'resume', 'demo', 'sim'];

for (const flag of ['--help', '-h']) {
  test(`every verb answers ${flag} with its usage on stdout and exit 0`, async () => {
    const runs = await Promise.all(VERBS.map((verb) => fleetgate([verb, flag])));
    for (const [index, run] of runs.entries()) {
      const verb = VERBS[index];
      assert.equal(run.code, 0, `fleetgate ${verb} ${flag}: exit ${run.code}, stderr ${run.stderr}`);
      assert.match(run.stdout, new RegExp(`^usage: fleetgate ${verb} `), `fleetgate ${verb} ${flag}`);
      assert.equal(run.stderr, '', `fleetgate ${verb} ${flag} writes nothing to stderr`);
    }
  });
}

test('serve --help starts nothing: its usage names the flags, even after other flags', async () => {
  const run = await fleetgate(['serve', '--listen', '127.0.0.1:0', '--help']);
  assert.equal(run.code, 0);
  for (const flag of ['--config', '--listen', '--backend', '--set', '--log-level']) {
    assert.ok(run.stdout.includes(flag), `usage names ${flag}`);
  }
  assert.doesNotMatch(run.stdout + run.stderr, /listening/);
});

test('--version prints the version in package.json', async () => {
  const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
  for (const flag of ['--version', '-v']) {
    const run = await fleetgate([flag]);
    assert.equal(run.code, 0);
    assert.equal(run.stdout, `fleetgate ${version}\n`);
  }
});

/** The demo's output up to its first log line after the proxy URL, then the demo stopped by its PID. */
async function demoOutput(t: test.TestContext, env: NodeJS.ProcessEnv): Promise<string> {
  const port = await freePort();
  const basePort = await freePortRange(1);
  const args = ['demo', '--port', String(port), '--base-port', String(basePort), '--backends', '1'];
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/index.ts', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env,
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let output = '';
  child.stdout.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr.on('data', (chunk) => {
    output += chunk;
  });
  await waitFor(() => output.includes(`proxy        http://127.0.0.1:${port}`), {
    timeoutMs: 15_000,
    what: 'the proxy URL line',
  });
  // The logger's lines are the coloured part; wait for one so the check covers it.
  await waitFor(() => /INFO.*gpu0: down -> starting/.test(output), { timeoutMs: 15_000, what: 'a log line' });
  assert.ok(child.pid !== undefined);
  process.kill(child.pid, 'SIGINT');
  await exited;
  return output;
}

test('demo piped to a file writes no escape codes; FORCE_COLOR=1 brings the colours back', async (t) => {
  const piped = await demoOutput(t, plainEnv());
  assert.ok(!piped.includes('\x1b'), `escape codes in piped output: ${JSON.stringify(piped.slice(0, 400))}`);
  const forced = await demoOutput(t, plainEnv({ FORCE_COLOR: '1' }));
  assert.ok(forced.includes('\x1b['), 'FORCE_COLOR=1 colours the log lines');
});
