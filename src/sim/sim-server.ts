/**
 * A simulated SGLang (or vLLM) server: one per GPU, driven in-process by tests, the demo and
 * `fleetgate sim`. Events: `status` (SimStatus), `ready`, `exit` (reason), `request` ({path, method}),
 * `disconnect`.
 */
import { EventEmitter } from 'node:events';
import { Launch, type LaunchOwner } from './launch.js';
import { mergeOptions, type ResolvedSimOptions, resolveOptions } from './options.js';
import { Timers } from './timers.js';
import { INFO_PATHS, newCounters, type SimCounters, type SimOptions, type SimStatus } from './types.js';

export class SimServer extends EventEmitter {
  readonly port: number;
  readonly url: string;
  readonly name: string;
  readonly counters: SimCounters = newCounters();
  #opts: ResolvedSimOptions;
  #status: SimStatus = 'stopped';
  #launch: Launch | null = null;
  /** The pending automatic relaunch after a fatal exit. */
  #relaunch = new Timers();

  constructor(opts: SimOptions) {
    super();
    this.#opts = resolveOptions(opts);
    this.port = this.#opts.port;
    this.name = this.#opts.name;
    const host = this.#opts.host.includes(':') ? `[${this.#opts.host}]` : this.#opts.host;
    this.url = `http://${host}:${this.port}`;
  }

  get status(): SimStatus {
    return this.#status;
  }

  /** The options in force, defaults filled in. */
  get options(): Readonly<ResolvedSimOptions> {
    return this.#opts;
  }

  /** Begins the lifecycle (port closed until the HTTP phase). No-op while a launch is running. */
  start(): void {
    if (this.#launch !== null) return;
    this.#relaunch.clearAll();
    this.#begin(false);
  }

  /** Resolves at "fired up and ready to roll"; rejects on timeout, `stop()`, or a fatal exit without auto-restart. */
  whenReady(timeoutMs = 60_000): Promise<void> {
    if (this.#status === 'ready') return Promise.resolve();
    if (this.#status === 'exited' && this.#opts.restartAfterMs === null) {
      return Promise.reject(new Error(`${this.name} exited before ready`));
    }
    return new Promise((resolve, reject) => {
      const cleanup = () => {
        clearTimeout(timer);
        this.off('ready', onReady);
        this.off('exit', onExit);
        this.off('status', onStatus);
      };
      const onReady = () => {
        cleanup();
        resolve();
      };
      const onExit = (reason: string) => {
        if (this.#opts.restartAfterMs !== null) return;
        cleanup();
        reject(new Error(`${this.name} exited before ready: ${reason}`));
      };
      const onStatus = (status: SimStatus) => {
        if (status !== 'stopped') return;
        cleanup();
        reject(new Error(`${this.name} was stopped before ready`));
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`${this.name} not ready after ${timeoutMs} ms (status ${this.#status})`));
      }, timeoutMs);
      this.on('ready', onReady);
      this.on('exit', onExit);
      this.on('status', onStatus);
    });
  }

  /** A scheduler exception now: log lines, port closed, every connection dropped (streams cut without [DONE]). */
  async crash(message?: string): Promise<void> {
    await this.#launch?.crash(message);
  }

  /** Stops answering all requests (accepts, never replies), `/health` included. */
  hang(): void {
    this.#launch?.hang();
  }

  /** The scheduler dies while HTTP stays up (issue #6624), as `scheduler_dead_http_alive` does. */
  killScheduler(message?: string): void {
    this.#launch?.schedulerDead(message);
  }

  /** One DP rank dies, as `dp_rank_dead` does: `fraction` of new generation requests hang with no byte. */
  killDpRank(fraction?: number): void {
    this.#launch?.dpRankDead(fraction);
  }

  /** Multiplies every step time by `factor` from now on (1 = normal). */
  slow(factor: number): void {
    if (!(factor > 0)) throw new RangeError(`slow(): factor must be > 0, got ${factor}`);
    this.#opts.engine.slowdown = factor;
    this.#launch?.engine.setSlowdown(factor);
  }

  /** Stops the running launch (if any) and relaunches with a fresh (truncated) log. */
  async restart(opts: Partial<SimOptions> = {}): Promise<void> {
    this.#relaunch.clearAll();
    const old = this.#launch;
    this.#launch = null;
    await old?.teardown();
    this.#opts = mergeOptions(this.#opts, opts);
    this.#begin(true);
  }

  /** Closes everything and clears every timer. */
  async stop(): Promise<void> {
    this.#relaunch.clearAll();
    const old = this.#launch;
    this.#launch = null;
    await old?.teardown();
    this.#setStatus('stopped');
  }

  #setStatus(status: SimStatus): void {
    if (status === this.#status) return;
    this.#status = status;
    this.emit('status', status);
  }

  #received(path: string, method: string): void {
    const c = this.counters;
    c.byPath[path] = (c.byPath[path] ?? 0) + 1;
    if (!INFO_PATHS.has(path)) {
      c.requests++;
      if (this.#status !== 'ready') c.requestsWhileNotReady++;
    }
    if (this.listenerCount('request') > 0) this.emit('request', { path, method });
  }

  #begin(truncateLog: boolean): void {
    const self = this;
    let launch: Launch | null = null;
    const current = () => launch !== null && self.#launch === launch;
    const owner: LaunchOwner = {
      counters: this.counters,
      get status() {
        return self.#status;
      },
      setStatus: (status) => {
        if (current()) this.#setStatus(status);
      },
      received: (path, method) => this.#received(path, method),
      generationBody: (path, body) => {
        if (this.listenerCount('generation') > 0) this.emit('generation', { path, body });
      },
      clientGone: () => this.emit('disconnect'),
      ready: () => {
        if (!current()) return;
        this.#setStatus('ready');
        this.emit('ready');
      },
      exited: (reason) => {
        if (!current()) return;
        this.#launch = null;
        this.#setStatus('exited');
        this.emit('exit', reason);
        this.#scheduleRelaunch();
      },
    };
    launch = new Launch(this.#opts, owner, { truncateLog });
    this.#launch = launch;
    this.#setStatus('loading_weights');
    launch.run();
  }

  /** `restartAfterMs`: relaunch like a supervisor would; a scripted failure happens only once. */
  #scheduleRelaunch(): void {
    const delay = this.#opts.restartAfterMs;
    if (delay === null) return;
    this.#relaunch.set(() => {
      if (this.#launch !== null) return;
      this.#opts = { ...this.#opts, failure: null };
      this.#begin(true);
    }, delay);
  }
}
