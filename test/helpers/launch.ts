/**
 * `fleetgate launch` as a process, with `fleetgate sim` engines (one process per port) started through it.
 * The config goes to a temporary file; after the test fleetgate gets SIGTERM (it then stops its engines)
 * and, as a last resort, every engine group it reported is killed.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import type { BackendStatus, FleetStatus } from '../../src/admin/fleet-summary.js';
import { fleetgateEntry, REPO } from './cli-entry.js';
import { freePorts } from './net.js';
import { waitFor } from './wait.js';

/** `fleetgate sim` as one engine: its log on stdout, exiting on a fatal error like a real server. */
export function simCommand(args: string): string {
  return `${process.execPath} ${fleetgateEntry().join(' ')} sim --port {port} --name {name} --log-stdout --exit-on-failure --speed fast ${args}`;
}

/** Like `simCommand`, but the engine first starts a child of its own that ignores SIGTERM (test/helpers/engine-with-child.ts). */
export function simWithChildCommand(args: string): string {
  const helper = join(REPO, 'test/helpers/engine-with-child.ts');
  return `${process.execPath} --import tsx ${helper} --port {port} --name {name} --log-stdout --exit-on-failure --speed fast ${args}`;
}

export interface LaunchedFleetgate {
  child: ChildProcess;
  url: string;
  dir: string;
  /** The config as written; `rewrite` writes a changed copy to the same file. */
  config: Record<string, unknown>;
  rewrite(config: Record<string, unknown>): void;
  output(): string;
  exit: Promise<number | null>;
  status(): Promise<FleetStatus>;
  backend(name: string): Promise<BackendStatus>;
}

export interface LaunchOptions {
  /** Added to the `launch:` section. */
  launch: Record<string, unknown>;
  /** Top-level config keys. */
  config?: Record<string, unknown>;
  engines?: number;
}

/** Starts fleetgate launch and waits for its listen line. */
export async function startLaunch(t: TestContext, opts: LaunchOptions): Promise<LaunchedFleetgate> {
  const dir = mkdtempSync(join(tmpdir(), 'fleetgate-launch-'));
  const ports = await freePorts(opts.engines ?? 1);
  const config = {
    listen: '127.0.0.1:0',
    health: { starting_interval: '100ms', interval: '500ms' },
    log: { level: 'info' },
    ...opts.config,
    launch: {
      ports: ports.length === 1 ? ports[0] : ports,
      log: join(dir, 'logs/sglang_{name}.log'),
      restart_backoff: '300ms',
      stop_grace: '2s',
      ...opts.launch,
    },
  };
  const file = join(dir, 'fleetgate.yaml');
  writeFileSync(file, JSON.stringify(config));
  const { child, exit, output, listening } = spawnLaunch(file);
  const pids = new Set<number>();
  t.after(async () => {
    await stopLaunched(child, exit, pids, 15_000);
    rmSync(dir, { recursive: true, force: true });
  });
  const url = await listening(60_000);
  const status = async () => {
    const res = await fetch(`${url}/fleet/status`);
    const body = (await res.json()) as FleetStatus;
    for (const b of body.backends) if (b.supervision?.pid) pids.add(b.supervision.pid);
    return body;
  };
  const backend = async (name: string) => {
    const found = (await status()).backends.find((b) => b.name === name);
    if (found === undefined) throw new Error(`no backend ${name}`);
    return found;
  };
  const rewrite = (next: Record<string, unknown>) => writeFileSync(file, JSON.stringify(next));
  return { child, url, dir, config, rewrite, output, exit, status, backend };
}

export interface LaunchProcess {
  child: ChildProcess;
  exit: Promise<number | null>;
  /** What it printed (the last `keepChars` characters). */
  output(): string;
  /** The URL of its listen line, once printed. */
  listening(timeoutMs: number): Promise<string>;
}

/** `fleetgate launch --config FILE` as a child process (the launch tests and bench:soak). */
export function spawnLaunch(file: string, keepChars = Number.POSITIVE_INFINITY): LaunchProcess {
  const child = spawn(process.execPath, [...fleetgateEntry(), 'launch', '--config', file], {
    cwd: REPO,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (chunk: Buffer) => {
    output += chunk.toString();
    if (output.length > keepChars) output = output.slice(-keepChars);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const listening = (timeoutMs: number) =>
    waitFor(() => /"url":"(http:[^"]+)"/.exec(output)?.[1], { what: `the listen line in: ${output}`, timeoutMs });
  return { child, exit, output: () => output, listening };
}

/** Whether a process exists and is not a zombie. */
/**
 * Stops a `fleetgate launch` process: SIGTERM, SIGKILL if it has not exited within `graceMs`, then
 * SIGKILL to the process group of each engine it started (whatever it left behind).
 */
export async function stopLaunched(
  child: ChildProcess,
  exit: Promise<unknown>,
  enginePids: Iterable<number>,
  graceMs: number,
): Promise<void> {
  if (child.exitCode === null) {
    child.kill('SIGTERM');
    await Promise.race([exit, new Promise((resolve) => setTimeout(resolve, graceMs).unref())]);
    if (child.exitCode === null) child.kill('SIGKILL');
  }
  for (const pid of enginePids) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {}
  }
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

export function waitReady(fleetgate: LaunchedFleetgate, name: string, timeoutMs = 60_000) {
  return waitFor(async () => (await fleetgate.backend(name)).state === 'ready', { what: `${name} ready`, timeoutMs });
}

/** `fleetgate ARGS` run to its end, with no admin URL or token from the environment. */
export function runFleetgate(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...fleetgateEntry(), ...args],
      { cwd: REPO, env: { ...process.env, FLEETGATE_URL: '', FLEETGATE_ADMIN_TOKEN: '' } },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}
