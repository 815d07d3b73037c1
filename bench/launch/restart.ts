/**
 * `npm run bench:launch`: how fast `fleetgate launch` brings a killed engine back, and how long a
 * SIGTERM stop takes. Two `fleetgate sim --speed fast` engines (run from source through tsx, so each
 * start includes tsx's own start-up); ROUNDS times: SIGKILL gpu0's process, then time until fleetgate
 * has a new process (restart_backoff 1s) and until gpu0 is ready again. Then SIGTERM to fleetgate
 * with engines whose child ignores SIGTERM (stop_grace 1s): time until fleetgate exited, no process
 * left. Writes bench/results/raw/launch-restart-<time>.json (ignored by git). Bounded: 5 rounds, 60 s per wait.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FleetStatus } from '../../src/admin/fleet-summary.js';
import { liveGroupMembers } from '../../src/launch/process-group.js';

const REPO = join(import.meta.dirname, '../..');
const CLI = join(REPO, 'src/cli/index.ts');
const ROUNDS = 5;
const WAIT_MS = 60_000;

async function until<T>(check: () => Promise<T | null | undefined | false>, what: string): Promise<T> {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch {}
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function startFleetgate(dir: string, command: string, ports: number[]): { child: ChildProcess; url: Promise<string> } {
  const file = join(dir, 'fleetgate.yaml');
  writeFileSync(
    file,
    JSON.stringify({
      listen: '127.0.0.1:0',
      health: { starting_interval: '100ms' },
      log: { level: 'info' },
      launch: { command, ports, log: join(dir, 'logs/{name}.log'), restart_backoff: '1s', stop_grace: '1s' },
    }),
  );
  const child = spawn(process.execPath, ['--import', 'tsx', CLI, 'launch', '--config', file], {
    cwd: REPO,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout?.on('data', (chunk) => {
    output += chunk;
  });
  const url = until(async () => /"url":"(http:[^"]+)"/.exec(output)?.[1], 'the listen line');
  return { child, url };
}

async function status(url: string): Promise<FleetStatus> {
  return (await (await fetch(`${url}/fleet/status`)).json()) as FleetStatus;
}

const gpu0 = async (url: string) => (await status(url)).backends.find((b) => b.name === 'gpu0');

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-launch-'));
  const ports = [31_800 + (process.pid % 100) * 2, 31_801 + (process.pid % 100) * 2];
  const sim = `${process.execPath} --import tsx ${CLI} sim --port {port} --name {name} --log-stdout --exit-on-failure --speed fast`;
  const rounds: { restartedMs: number; readyMs: number }[] = [];
  const load: number[] = [loadavg()[0]];
  {
    const { child, url: urlPromise } = startFleetgate(dir, sim, ports);
    const url = await urlPromise;
    await until(async () => (await status(url)).ready === 2, 'both ready');
    for (let round = 0; round < ROUNDS; round++) {
      const before = (await gpu0(url))?.supervision?.pid as number;
      const killedAt = performance.now();
      process.kill(before, 'SIGKILL');
      await until(async () => {
        const pid = (await gpu0(url))?.supervision?.pid;
        return pid && pid !== before;
      }, 'a new process');
      const restartedMs = performance.now() - killedAt;
      await until(async () => (await gpu0(url))?.state === 'ready', 'ready again');
      rounds.push({ restartedMs: Math.round(restartedMs), readyMs: Math.round(performance.now() - killedAt) });
      load.push(loadavg()[0]);
    }
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
  }

  const helper = join(REPO, 'test/helpers/engine-with-child.ts');
  const withChild = `${process.execPath} --import tsx ${helper} --port {port} --name {name} --log-stdout --exit-on-failure --speed fast`;
  const { child, url: urlPromise } = startFleetgate(dir, withChild, ports);
  const url = await urlPromise;
  await until(async () => (await status(url)).ready === 2, 'both ready (engines with a child)');
  const pids = (await status(url)).backends.map((b) => b.supervision?.pid as number);
  const stopAt = performance.now();
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
  const stopMs = Math.round(performance.now() - stopAt);
  const left = pids.flatMap((pid) => liveGroupMembers(pid) ?? []);
  rmSync(dir, { recursive: true, force: true });

  const sorted = (values: number[]) => [...values].sort((a, b) => a - b);
  const median = (values: number[]) => sorted(values)[Math.floor(values.length / 2)];
  const result = {
    when: new Date().toISOString(),
    what: 'fleetgate launch: SIGKILL of a fast sim engine to a new process (restart_backoff 1s) and to ready; SIGTERM stop with engines whose child ignores SIGTERM (stop_grace 1s)',
    rounds,
    median_restarted_ms: median(rounds.map((r) => r.restartedMs)),
    median_ready_ms: median(rounds.map((r) => r.readyMs)),
    sigterm_stop_ms: stopMs,
    processes_left_after_stop: left.length,
    loadavg_1m: load.map((l) => Number(l.toFixed(1))),
  };
  mkdirSync(join(REPO, 'bench/results/raw'), { recursive: true });
  const out = join(REPO, `bench/results/raw/launch-restart-${result.when.replace(/[:.]/g, '-').slice(0, 19)}.json`);
  writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(result, null, 2)}\nwritten to ${out}\n`);
}

await main();
