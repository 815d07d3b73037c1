/**
 * `fleetgate wait` and `fleetgate status` as a script runs them: child processes against a real
 * fleetgate in front of simulated servers, checked by exit code and by the lines they print when
 * not on a terminal.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import type { FleetStatus } from '../../src/admin/fleet-summary.js';
import { fleetgateEntry } from '../helpers/cli-entry.js';
import { backendsFor, createSims, startGateway } from '../helpers/fleet.js';
import { freePort } from '../helpers/net.js';
import { waitFor } from '../helpers/wait.js';

const ROOT = join(import.meta.dirname, '..', '..');
const HEALTH = { starting_interval: '100ms', interval: '1s' };
const STAMP = /^\[\d{2}:\d{2}:\d{2}\] /;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** `fleetgate <args>` from the sources; killed (and failed) if it outlives `timeoutMs`. */
function fleetgate(t: TestContext, args: string[], timeoutMs = 20_000): Promise<Run> {
  const started = Date.now();
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' };
  delete env.FLEETGATE_URL;
  delete env.FORCE_COLOR;
  const child = spawn(process.execPath, [...fleetgateEntry(), ...args], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`fleetgate ${args.join(' ')} still running after ${timeoutMs} ms\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    });
  });
}

function lines(text: string): string[] {
  return text.split('\n').filter((l) => l !== '');
}

async function logDir(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'fleetgate-cli-wait-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

test('wait: started before fleetgate is up, exits 0 once all backends are ready, printing progress lines', async (t) => {
  const dir = await logDir(t);
  const sims = await createSims(
    t,
    [0, 1, 2].map((i) => ({
      logFile: join(dir, `sglang_gpu${i}.log`),
      timing: { startDelayMs: i * 400, shards: 8, shardMs: 40 },
    })),
  );
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const wait = fleetgate(t, ['wait', '--url', url, '--timeout', '20s']);
  // fleetgate comes up a little later, as in a launch script; then the servers start.
  await new Promise((resolve) => setTimeout(resolve, 300));
  await startGateway(t, {
    listen: `127.0.0.1:${port}`,
    backends: backendsFor(sims, (sim) => ({ log: sim.options.logFile })),
    health: HEALTH,
  });
  for (const sim of sims) sim.start();

  const run = await wait;
  assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
  assert.equal(run.stderr, '');
  const out = lines(run.stdout);
  for (const line of out) assert.match(line, STAMP);
  assert.match(out.at(-1)!, /^\[\d{2}:\d{2}:\d{2}\] 3\/3 ready$/);
  assert.ok(
    out.some((l) => /\] [012]\/3 ready; gpu\d /.test(l)),
    `a line with backends still starting:\n${run.stdout}`,
  );
  // Lines come when something changes, not on every poll.
  assert.equal(new Set(out).size, out.length, `repeated lines:\n${run.stdout}`);
});

test('wait: exit 1 when the timeout passes, naming what is not ready', async (t) => {
  const sims = await createSims(t, [{}, {}]);
  const { url } = await startGateway(t, { backends: backendsFor(sims), health: HEALTH });
  sims[0].start();
  await sims[0].whenReady(5000);
  const [timedOut, unreachable] = await Promise.all([
    fleetgate(t, ['wait', '--url', url, '--ready', 'all', '--timeout', '500ms']),
    fleetgate(t, ['wait', '--url', `http://127.0.0.1:${await freePort()}`, '--timeout', '500ms']),
  ]);
  assert.equal(timedOut.code, 1, `${timedOut.stdout}\n${timedOut.stderr}`);
  assert.match(lines(timedOut.stderr).at(-1)!, /^\[\d{2}:\d{2}:\d{2}\] timed out after 500ms: 1\/2 ready; gpu1 down/);

  assert.equal(unreachable.code, 1, `${unreachable.stdout}\n${unreachable.stderr}`);
  assert.match(unreachable.stdout, /waiting for fleetgate: cannot reach fleetgate at .*: connection refused/);
  assert.match(unreachable.stderr, /timed out after 500ms: cannot reach fleetgate/);

  // --ready 1 is already met.
  const one = await fleetgate(t, ['wait', '--url', url, '--ready', '1', '--timeout', '5s']);
  assert.equal(one.code, 0, `${one.stdout}\n${one.stderr}`);
  assert.match(one.stdout, /1\/2 ready \(want 1\); gpu1 down/);
});

test('wait: a failed backend exits 3 with --fail-fast (reason shown); without it the wait goes on', async (t) => {
  const dir = await logDir(t);
  const sims = await createSims(t, [
    { logFile: join(dir, 'sglang_gpu0.log') },
    { logFile: join(dir, 'sglang_gpu1.log'), failure: { mode: 'cuda_oom_capture' } },
  ]);
  const { url } = await startGateway(t, {
    backends: backendsFor(sims, (sim) => ({ log: sim.options.logFile })),
    health: HEALTH,
  });
  const failFast = fleetgate(t, ['wait', '--url', url, '--fail-fast', '--timeout', '15s']);
  const patient = fleetgate(t, ['wait', '--url', url, '--timeout', '2s']);
  for (const sim of sims) sim.start();

  const ff = await failFast;
  assert.equal(ff.code, 3, `${ff.stdout}\n${ff.stderr}`);
  assert.match(
    lines(ff.stderr).at(-1)!,
    /^\[\d{2}:\d{2}:\d{2}\] gpu1 failed: .*(Capture cuda graph failed|CUDA out of memory).* \(--fail-fast; [01]\/2 ready\)$/,
  );

  const run = await patient;
  assert.equal(run.code, 1, `${run.stdout}\n${run.stderr}`);
  assert.match(run.stdout, /1\/2 ready; gpu1 failed: /);
  assert.match(run.stderr, /timed out after 2s: 1\/2 ready; gpu1 failed: /);
});

test('wait and status: usage errors exit 2 and name the flag', async (t) => {
  const runs = await Promise.all([
    fleetgate(t, ['wait', '--ready', 'many']),
    fleetgate(t, ['wait', '--timeout', 'soon']),
    fleetgate(t, ['wait', '--bogus']),
    fleetgate(t, ['status', '--verbose']),
    fleetgate(t, ['status', '--url', 'ftp://example']),
  ]);
  const [ready, timeout, bogus, status, url] = runs;
  for (const run of runs) assert.equal(run.code, 2, run.stderr);
  assert.match(ready.stderr, /^fleetgate wait: --ready must be .*'many'/);
  assert.match(timeout.stderr, /^fleetgate wait: --timeout must be a duration .*'soon'/);
  assert.match(bogus.stderr, /'--bogus'/);
  assert.match(bogus.stderr, /usage: fleetgate wait/);
  assert.match(status.stderr, /'--verbose'/);
  assert.match(url.stderr, /--url must be an http/);
  for (const run of runs) assert.equal(run.stdout, '');
});

test('status: a table with every backend and its state; --json is the /fleet/status JSON; exit 1 unreachable', async (t) => {
  const dir = await logDir(t);
  const sims = await createSims(t, [
    { logFile: join(dir, 'sglang_gpu0.log') },
    { logFile: join(dir, 'sglang_gpu1.log'), timing: { shards: 300, shardMs: 200 } },
    { logFile: join(dir, 'sglang_gpu2.log') },
  ]);
  const { url, gateway } = await startGateway(t, {
    backends: backendsFor(sims, (sim) => ({ log: sim.options.logFile })),
    health: HEALTH,
  });
  sims[0].start();
  sims[1].start();
  await sims[0].whenReady(5000);
  const registry = gateway.fleet.registry;
  await waitFor(
    () => registry.get('gpu0')?.state === 'ready' && registry.get('gpu1')?.lifecycle.snapshot.progress !== null,
    { timeoutMs: 5000, what: 'gpu0 ready and gpu1 loading' },
  );

  const [table, json, down] = await Promise.all([
    fleetgate(t, ['status', '--url', url]),
    fleetgate(t, ['status', '--url', url, '--json']),
    fleetgate(t, ['status', '--url', `http://127.0.0.1:${await freePort()}`]),
  ]);
  assert.equal(table.code, 0, table.stderr);
  const rows = lines(table.stdout);
  assert.match(rows[0], /^NAME\s+STATE\s+PHASE\/PROGRESS\s+INFLIGHT\s+REASON$/);
  assert.match(rows[1], /^gpu0\s+ready\s/);
  assert.match(rows[2], /^gpu1\s+starting\s+loading weights \d+\/300 \(\d+%/);
  assert.match(rows[3], /^gpu2\s+down\s/);
  assert.match(rows.at(-1)!, /^1\/3 ready, 1 down, 1 loading weights \d+\/300$/);
  assert.doesNotMatch(table.stdout, /\x1b\[/);

  assert.equal(json.code, 0, json.stderr);
  const status = JSON.parse(json.stdout) as FleetStatus;
  assert.equal(status.total, 3);
  assert.deepEqual(
    status.backends.map((b) => b.name),
    ['gpu0', 'gpu1', 'gpu2'],
  );
  assert.equal(status.backends[0].state, 'ready');

  assert.equal(down.code, 1);
  assert.equal(down.stdout, '');
  assert.match(
    down.stderr,
    /^fleetgate status: cannot reach fleetgate at http:\/\/127\.0\.0\.1:\d+\/: connection refused/,
  );
});
