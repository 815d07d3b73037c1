/**
 * Active health checking: one loop per backend. Cadence follows state (fast while not ready, slow
 * while ready, with jitter) and probes to one backend never overlap: a timed-out SGLang health probe
 * keeps running inside the server, and piling them up has crashed servers (reference 1.3, #35884).
 */
import { Client } from 'undici';
import type { Config } from '../config/types.js';
import { checkReadiness, type ReadinessTarget } from './readiness.js';
import type { Backend, FleetRegistry } from './registry.js';

export interface ProberOptions {
  registry: FleetRegistry;
  health: Config['health'];
  expectModel: string | null;
  apiKey: string | null;
  random?: () => number;
}

class BackendProber {
  readonly #backend: Backend;
  readonly #opts: ProberOptions;
  readonly #client: Client;
  readonly #target: ReadinessTarget;
  #timer: NodeJS.Timeout | null = null;
  #inFlight = false;
  #again = false;
  #stopped = false;

  constructor(backend: Backend, opts: ProberOptions) {
    this.#backend = backend;
    this.#opts = opts;
    // No keep-alive (`pipelining: 0`): SGLang's uvicorn drops idle connections after 5 s, and a
    // probe must not fail on a connection the server already closed.
    this.#client = new Client(backend.url, { connect: { timeout: opts.health.timeout }, pipelining: 0 });
    this.#target = {
      kind: backend.config.kind,
      expectModel: opts.expectModel,
      timeoutMs: opts.health.timeout,
      apiKey: opts.apiKey,
    };
  }

  start(): void {
    this.probeNow();
  }

  /** Probe as soon as possible (e.g. the log said the server is up); never overlaps a running one. */
  probeNow(): void {
    if (this.#stopped) return;
    if (this.#inFlight) {
      this.#again = true;
      return;
    }
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    void this.#run();
  }

  /** The state changed: a backend that just left `ready` is re-probed at the fast cadence, not the slow one. */
  reschedule(): void {
    if (this.#stopped || this.#inFlight) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#schedule();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.#client.destroy();
  }

  async #run(): Promise<void> {
    this.#inFlight = true;
    const result = await checkReadiness(this.#client, this.#target);
    this.#inFlight = false;
    if (this.#stopped) return;
    this.#opts.registry.apply(this.#backend, { type: 'probe', result });
    if (this.#again) {
      this.#again = false;
      this.probeNow();
      return;
    }
    this.#schedule();
  }

  #schedule(): void {
    const { interval, starting_interval } = this.#opts.health;
    const base = this.#backend.state === 'ready' ? interval : starting_interval;
    const random = this.#opts.random ?? Math.random;
    const jittered = base * (0.9 + 0.2 * random());
    this.#timer = setTimeout(() => this.probeNow(), Math.max(10, jittered));
    this.#timer.unref();
  }
}

/** Owns one prober per backend, following the registry's additions and removals once started. */
export class Prober {
  readonly #opts: ProberOptions;
  readonly #probers = new Map<Backend, BackendProber>();
  #started = false;

  constructor(opts: ProberOptions) {
    this.#opts = opts;
    opts.registry.on('added', (backend) => {
      if (this.#started) this.#add(backend);
    });
    opts.registry.on('removed', (backend) => void this.#remove(backend));
    opts.registry.on('transition', ({ backend, from }) => {
      if (from === 'ready') this.#probers.get(backend)?.reschedule();
    });
  }

  start(): void {
    this.#started = true;
    for (const backend of this.#opts.registry.list()) this.#add(backend);
  }

  probeNow(backend: Backend): void {
    this.#probers.get(backend)?.probeNow();
  }

  async stop(): Promise<void> {
    this.#started = false;
    await Promise.all([...this.#probers.keys()].map((backend) => this.#remove(backend)));
  }

  #add(backend: Backend): void {
    if (this.#probers.has(backend)) return;
    const prober = new BackendProber(backend, this.#opts);
    this.#probers.set(backend, prober);
    prober.start();
  }

  async #remove(backend: Backend): Promise<void> {
    const prober = this.#probers.get(backend);
    this.#probers.delete(backend);
    await prober?.stop();
  }
}
