/** Starts a sim-host process (simulated SGLang servers) pinned to a core, and drives its control port. */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import type { SimCounters, SimEngineOptions, SimOptions, SimStatus, SimTiming } from '../../src/sim/index.js';
import { freePorts, type Managed, spawnPinned, waitFor } from './procs.js';

interface SimServerSpec {
  port: number;
  name: string;
  engine: Partial<SimEngineOptions>;
  timing?: Partial<SimTiming>;
  /** Not started with the others: `go()` starts it this many ms later. */
  lateMs?: number;
  restartAfterMs?: number | null;
  /** SGLang version; 'old' (v0.4): `/health` answers 200 whatever the scheduler does. */
  version?: 'new' | 'old';
  /** The model directory and KV-event publisher (bench:prefix's kv-aware arm). */
  model?: SimModelOptions;
}

/** A server's tokenizer and chat template (`--model-path`), reasoning length, KV-event publisher. */
export type SimModelOptions = Pick<SimOptions, 'modelPath' | 'thinkTokens' | 'kvEvents'>;

export interface SimHostSpec {
  controlPort: number;
  servers: SimServerSpec[];
}

export interface SimStat {
  name: string;
  port: number;
  status: SimStatus;
  counters: SimCounters;
}

const HOST_SCRIPT = fileURLToPath(new URL('./sim-host.ts', import.meta.url));
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export class SimHost {
  readonly proc: Managed;
  readonly urls: string[];
  readonly #control: string;
  readonly #spec: SimHostSpec;

  private constructor(proc: Managed, spec: SimHostSpec) {
    this.proc = proc;
    this.#spec = spec;
    this.#control = `http://127.0.0.1:${spec.controlPort}`;
    this.urls = spec.servers.map((s) => `http://127.0.0.1:${s.port}`);
  }

  /** `count` servers named gpu0.. with per-server engine options; waits until the non-late ones are ready. */
  static async start(opts: {
    count: number;
    engine: (i: number) => Partial<SimEngineOptions>;
    cpu: number | null;
    logDir: string;
    lateMs?: (i: number) => number | undefined;
    restartAfterMs?: number | null;
    version?: 'new' | 'old';
    model?: (i: number) => SimModelOptions | undefined;
  }): Promise<SimHost> {
    const ports = await freePorts(opts.count + 1);
    const controlPort = ports.pop() as number;
    const spec: SimHostSpec = {
      controlPort,
      servers: ports.map((port, i) => ({
        port,
        name: `gpu${i}`,
        engine: opts.engine(i),
        lateMs: opts.lateMs?.(i),
        restartAfterMs: opts.restartAfterMs ?? null,
        version: opts.version,
        model: opts.model?.(i),
      })),
    };
    const proc = spawnPinned('sims', process.execPath, ['--import', 'tsx', HOST_SCRIPT, JSON.stringify(spec)], {
      cpu: opts.cpu,
      logFile: join(opts.logDir, `sims-${controlPort}.log`),
      cwd: REPO_ROOT,
    });
    const host = new SimHost(proc, spec);
    let exited = false;
    void proc.exited.then(() => {
      exited = true;
    });
    await waitFor(
      async () => {
        if (exited) throw new Error('sim host exited');
        const stats = await host.stats();
        return stats.every((s, i) => spec.servers[i].lateMs !== undefined || s.status === 'ready');
      },
      'simulated servers ready',
      30_000,
      50,
    );
    return host;
  }

  async stats(): Promise<SimStat[]> {
    const res = await request(`${this.#control}/stats`);
    return (await res.body.json()) as SimStat[];
  }

  async #post(path: string): Promise<void> {
    const res = await request(`${this.#control}${path}`, { method: 'POST' });
    await res.body.dump();
    if (res.statusCode !== 200) throw new Error(`sim host ${path}: ${res.statusCode}`);
  }

  go(): Promise<void> {
    return this.#post('/go');
  }

  crash(index: number): Promise<void> {
    return this.#post(`/crash?i=${index}`);
  }

  /** Server `index`'s scheduler dies; its HTTP server stays up. */
  schedulerDead(index: number): Promise<void> {
    return this.#post(`/scheduler-dead?i=${index}`);
  }

  get serverCount(): number {
    return this.#spec.servers.length;
  }

  async stop(): Promise<void> {
    try {
      await this.#post('/quit');
    } catch {
      // already gone
    }
    await this.proc.stop(3000);
  }
}
