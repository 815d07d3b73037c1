/**
 * Carries out a planned fault against a fleet under `fleetgate launch`: signals to an engine's process
 * (its pid from `/fleet/status`), a fault file read by `fleetgate sim --fault-file` (start-up OOM at
 * its next start; `dp_rank_dead` and a dead scheduler on SIGUSR2), SIGHUP to fleetgate, admin drain
 * and resume, and bursts of slow or aborting clients (told to the load). Returns what it did, for
 * the ledger's fault log; every stopped engine is continued again by `cleanup()`.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PlannedFault } from './faults.js';

interface BackendView {
  name: string;
  state: string;
  supervision?: { pid?: number | null } | null;
}

export interface FaultTarget {
  url: string;
  fleetgatePid: number;
  faultDir: string;
  /** The next `count` streamed requests of the load behave so. */
  clientBurst(mode: 'slow-reader' | 'abort', count: number): void;
}

export interface DoneFault {
  atMs: number;
  kind: PlannedFault['kind'];
  target: string | null;
  note: string;
}

const ENGINE_FAULTS = new Set(['sigkill', 'sigstop', 'dp_rank_dead', 'scheduler_dead', 'startup_oom', 'drain']);

export function faultFileOf(dir: string, name: string): string {
  return join(dir, `fault-${name}`);
}

export class FaultRunner {
  readonly #target: FaultTarget;
  readonly #stopped = new Set<number>();
  readonly #pending = new Map<NodeJS.Timeout, () => void | Promise<void>>();

  constructor(target: FaultTarget) {
    this.#target = target;
  }

  async #backends(): Promise<BackendView[]> {
    const res = await fetch(`${this.#target.url}/fleet/status`);
    return ((await res.json()) as { backends: BackendView[] }).backends;
  }

  /** The planned engine if it is ready, else the next ready one; null if none (the fault is skipped). */
  async #pick(index: number): Promise<BackendView | null> {
    const backends = await this.#backends();
    for (let i = 0; i < backends.length; i++) {
      const backend = backends[(index + i) % backends.length];
      if (backend.state === 'ready' && backend.supervision?.pid) return backend;
    }
    return null;
  }

  #later(ms: number, fn: () => void | Promise<void>): void {
    const timer = setTimeout(() => {
      this.#pending.delete(timer);
      void fn();
    }, ms);
    this.#pending.set(timer, fn);
  }

  async run(fault: PlannedFault, atMs: number): Promise<DoneFault> {
    const done = (target: string | null, note: string): DoneFault => ({ atMs, kind: fault.kind, target, note });
    if (fault.kind === 'sighup') {
      process.kill(this.#target.fleetgatePid, 'SIGHUP');
      return done(null, 'reload');
    }
    if (fault.kind === 'slow_readers' || fault.kind === 'client_aborts') {
      const count = 4 + (fault.engine % 4);
      this.#target.clientBurst(fault.kind === 'slow_readers' ? 'slow-reader' : 'abort', count);
      return done(null, `${count} clients`);
    }
    if (!ENGINE_FAULTS.has(fault.kind)) return done(null, 'unknown kind');
    const backend = await this.#pick(fault.engine);
    if (backend === null) return done(null, 'skipped: no ready engine');
    const pid = backend.supervision?.pid as number;
    const file = faultFileOf(this.#target.faultDir, backend.name);
    switch (fault.kind) {
      case 'sigkill':
        process.kill(pid, 'SIGKILL');
        return done(backend.name, `pid ${pid}`);
      case 'sigstop':
        process.kill(pid, 'SIGSTOP');
        this.#stopped.add(pid);
        this.#later(fault.durationMs, () => this.#continue(pid));
        return done(backend.name, `pid ${pid} for ${fault.durationMs} ms`);
      case 'dp_rank_dead':
        writeFileSync(file, 'dp_rank_dead:0.5');
        process.kill(pid, 'SIGUSR2');
        return done(backend.name, 'half the new requests hang');
      case 'scheduler_dead':
        writeFileSync(file, 'scheduler_dead_http_alive');
        process.kill(pid, 'SIGUSR2');
        return done(backend.name, 'HTTP up, scheduler dead');
      case 'startup_oom':
        writeFileSync(file, 'not_enough_memory');
        process.kill(pid, 'SIGKILL');
        return done(backend.name, 'killed; its restart dies of OOM once');
      case 'drain': {
        const name = encodeURIComponent(backend.name);
        await fetch(`${this.#target.url}/fleet/backends/${name}/drain`, { method: 'POST' });
        this.#later(fault.durationMs, async () => {
          await fetch(`${this.#target.url}/fleet/backends/${name}/resume`, { method: 'POST' }).catch(() => {});
        });
        return done(backend.name, `resumed after ${fault.durationMs} ms`);
      }
      default:
        return done(null, 'unknown kind');
    }
  }

  #continue(pid: number): void {
    this.#stopped.delete(pid);
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      // Restarted meanwhile: the stopped process is gone.
    }
  }

  /** Runs pending resumes now and continues every engine still stopped. */
  async cleanup(): Promise<void> {
    const pending = [...this.#pending];
    this.#pending.clear();
    for (const [timer] of pending) clearTimeout(timer);
    await Promise.all(pending.map(([, fn]) => fn()));
    for (const pid of [...this.#stopped]) this.#continue(pid);
  }
}
