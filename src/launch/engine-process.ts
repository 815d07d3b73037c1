/**
 * One engine process, in a process group of its own (`detached`), with stdout and stderr appended to
 * its log. Stopping signals the whole group: SGLang's scheduler and detokenizer children outlive a
 * killed parent otherwise, still holding the GPU.
 *
 * An engine that must stop with fleetgate (`on_exit: stop`) is started through util-linux's
 * `setpriv --pdeathsig SIGTERM`, which execs it (same pid) with the kernel's parent-death signal set:
 * a fleetgate killed by SIGKILL or the OOM killer, which runs no shutdown code, still takes its
 * engines down instead of leaving stale servers on their GPUs and ports. SGLang's own children set
 * the same signal on themselves, so the engine's tree follows it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, closeSync, constants, mkdirSync, openSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { liveGroupMembers } from './process-group.js';

export interface EngineExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the program could not be started at all (e.g. `spawn python ENOENT`). */
  error: string | null;
}

export interface EngineSpawn {
  argv: readonly string[];
  env: Readonly<Record<string, string>>;
  log: string;
  /** The engine gets SIGTERM if fleetgate dies (where `setpriv` is installed). */
  stopWithParent: boolean;
}

/** Whether `program` (a path, or a name looked up on PATH) names an executable file. */
export function runnable(program: string, path = process.env.PATH ?? ''): boolean {
  const candidates = program.includes('/') ? [program] : path.split(delimiter).map((dir) => join(dir, program));
  return candidates.some((file) => {
    try {
      accessSync(file, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

const SETPRIV = 'setpriv';

/**
 * The argv to spawn with `path` as PATH. A program that cannot be found is spawned as is, so that its
 * start fails with Node's own `spawn X ENOENT` rather than inside setpriv.
 */
export function spawnArgv(argv: readonly string[], stopWithParent: boolean, path: string): string[] {
  if (!stopWithParent || !runnable(SETPRIV, path) || !runnable(argv[0], path)) return [...argv];
  return [SETPRIV, '--pdeathsig', 'SIGTERM', ...argv];
}

const GROUP_POLL_MS = 50;
/** After SIGKILL the kernel tears the group down at once; this only bounds a pathological wait. */
const KILL_WAIT_MS = 5_000;

export class EngineProcess {
  /** The process and group id; null if it could not be started. */
  readonly pid: number | null;
  /** Resolves when the group leader exits. */
  readonly exited: Promise<EngineExit>;
  #exit: EngineExit | null = null;
  readonly #child: ChildProcess;

  constructor({ argv, env, log, stopWithParent }: EngineSpawn) {
    mkdirSync(dirname(log), { recursive: true });
    const fd = openSync(log, 'a');
    try {
      const fullEnv = { ...process.env, ...env };
      const [program, ...args] = spawnArgv(argv, stopWithParent, fullEnv.PATH ?? '');
      const child = spawn(program, args, { detached: true, stdio: ['ignore', fd, fd], env: fullEnv });
      // fleetgate may exit while engines keep running (`on_exit: keep`).
      child.unref();
      this.#child = child;
      this.pid = child.pid ?? null;
      this.exited = new Promise((resolve) => {
        const done = (exit: EngineExit) => {
          this.#exit ??= exit;
          resolve(this.#exit);
        };
        child.once('exit', (code, signal) => done({ code, signal, error: null }));
        child.once('error', (error) => done({ code: null, signal: null, error: error.message }));
      });
    } finally {
      closeSync(fd);
    }
  }

  get running(): boolean {
    return this.#exit === null;
  }

  /**
   * SIGTERM to the group, SIGKILL to whatever of it is left after `graceMs`; resolves when no process of
   * the group remains (or, after SIGKILL, a bounded wait passed).
   */
  async stop(graceMs: number): Promise<EngineExit> {
    // Waiting for its exit event: an unref'd child alone would let the event loop end first.
    this.#child.ref();
    if (this.pid !== null) {
      if (this.#signalGroup('SIGTERM')) await this.#groupGone(graceMs);
      if (this.#signalGroup('SIGKILL')) await this.#groupGone(KILL_WAIT_MS);
    }
    return this.exited;
  }

  /** True if the group still had a member to signal. */
  #signalGroup(signal: NodeJS.Signals | 0): boolean {
    try {
      process.kill(-(this.pid as number), signal);
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
      throw error;
    }
  }

  /** Zombies still count for kill(2) until reaped, which an init that does not reap never does. */
  #groupAlive(): boolean {
    return this.#signalGroup(0) && (liveGroupMembers(this.pid as number)?.length ?? 1) > 0;
  }

  async #groupGone(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.#groupAlive() && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, GROUP_POLL_MS));
    }
  }
}
