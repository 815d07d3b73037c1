/**
 * Child processes of a benchmark: spawned pinned to a core with `taskset`, output to a log file,
 * and stopped by PID only (the process and the descendants it forked, e.g. nginx workers), also
 * when the bench itself exits or is interrupted.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { waitFor as poll } from '../../test/helpers/wait.js';
import { descendants } from './proc-stats.js';

export interface Managed {
  readonly name: string;
  readonly pid: number;
  readonly child: ChildProcess;
  /** Resolves with the exit code (null after a signal). */
  readonly exited: Promise<number | null>;
  /** SIGTERM, then SIGKILL to whatever of its tree is left after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

const live = new Set<Managed>();
let hooked = false;

function killTree(pids: number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

function hookExit(): void {
  if (hooked) return;
  hooked = true;
  const killAll = () => {
    for (const m of live) killTree([m.pid, ...descendants(m.pid)], 'SIGKILL');
    live.clear();
  };
  process.on('exit', killAll);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      killAll();
      process.exit(130);
    });
  }
}

let tasksetChecked: boolean | null = null;
/** Whether `taskset` (util-linux) can pin processes here. */
export function haveTaskset(): boolean {
  if (tasksetChecked === null) {
    try {
      execFileSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' });
      tasksetChecked = true;
    } catch {
      tasksetChecked = false;
    }
  }
  return tasksetChecked;
}

/** Pins this process (all its threads) to `cpu`. */
export function pinSelf(cpu: number | null): void {
  if (cpu === null || !haveTaskset()) return;
  execFileSync('taskset', ['-a', '-cp', String(cpu), String(process.pid)], { stdio: 'ignore' });
}

export interface SpawnOptions {
  /** Core to pin to; null = no pinning. */
  cpu: number | null;
  /** stdout and stderr go here (appended); null = ignored. */
  logFile: string | null;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Keep stdout as a pipe (e.g. to read a "ready" line). */
  pipeStdout?: boolean;
  /** An IPC channel to the child (node children only). */
  ipc?: boolean;
}

export function spawnPinned(name: string, command: string, args: string[], opts: SpawnOptions): Managed {
  hookExit();
  const pinned = opts.cpu !== null && haveTaskset();
  const file = pinned ? 'taskset' : command;
  const argv = pinned ? ['-c', String(opts.cpu), command, ...args] : args;
  const fd = opts.logFile ? openSync(opts.logFile, 'a') : null;
  const out = fd ?? 'ignore';
  const stdio: ('pipe' | 'ignore' | 'ipc' | number)[] = ['ignore', opts.pipeStdout ? 'pipe' : out, out];
  if (opts.ipc) stdio.push('ipc');
  // taskset execs the command, so the child's PID is the command's.
  const child = spawn(file, argv, { stdio, env: opts.env ?? process.env, cwd: opts.cwd });
  if (fd !== null) closeSync(fd);
  if (child.pid === undefined) throw new Error(`${name}: could not spawn ${command}`);
  const pid = child.pid;
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => resolve(code));
    child.once('error', () => resolve(-1));
  });
  const managed: Managed = {
    name,
    pid,
    child,
    exited,
    async stop(graceMs = 3000) {
      const tree = [pid, ...descendants(pid)];
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), graceMs).unref());
      await Promise.race([exited, timer]);
      // Whatever of the tree is still there (e.g. nginx workers after a killed master) goes now.
      killTree(
        tree.filter((p) => p === pid || isAlive(p)),
        'SIGKILL',
      );
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
      live.delete(managed);
    },
  };
  live.add(managed);
  void exited.then(() => {
    if (descendants(pid).length === 0) live.delete(managed);
  });
  return managed;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

// The tests' helpers: one implementation of free ports and bounded polling for tests and benches.
export { freePort, freePorts } from '../../test/helpers/net.js';

/** Polls `check` until truthy or `timeoutMs` passes. */
export function waitFor<T>(
  check: () => T | Promise<T>,
  what: string,
  timeoutMs = 15_000,
  intervalMs = 25,
): Promise<NonNullable<T>> {
  return poll(check, { what, timeoutMs, intervalMs });
}
