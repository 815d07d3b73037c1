/**
 * A running fleet: the registry plus the I/O shells that feed it (prober, log followers, load
 * scraper, DNS discovery) and the clocks that re-evaluate time-based facts. `new Fleet()` registers
 * the configured backends and does no I/O; `start()` starts all of it and `stop()` stops it.
 */
import type { Logger } from 'pino';
import type { BackendConfig, Config, DnsDiscoveryConfig } from '../config/types.js';
import { BackendSync } from './backend-sync.js';
import { DnsDiscovery, type DnsResolver } from './dns-discovery.js';
import { DrainDeadlines } from './drain-deadline.js';
import { LoadScraper } from './load-scraper.js';
import { LogFollowers } from './logs/log-follower.js';
import { Prober } from './prober.js';
import { ProgressWatchdog } from './progress-watchdog.js';
import { type Backend, FleetRegistry } from './registry.js';

const TICK_MS = 1_000;

/** Often enough that a backend is judged within a quarter of `progress_timeout` of its deadline. */
function watchdogTickMs(timeoutMs: number): number {
  return Math.min(TICK_MS, Math.max(50, Math.floor(timeoutMs / 4)));
}

export interface FleetOptions {
  now?: () => number;
  logPollMs?: number;
  /** DNS discovery's resolver (tests inject a stub). */
  resolver?: DnsResolver;
  logger?: Logger;
  /** The backend holds a queue of its own (routing decides; the progress watchdog expects progress then). */
  hasOwnQueue?: (backend: Backend) => boolean;
}

export class Fleet {
  readonly registry: FleetRegistry;
  /** Backends from the config file and the admin API (DNS discovery owns its own). */
  readonly configured: BackendSync;
  /** The proxy reports each attempt to it (`health.progress_timeout`). */
  readonly watchdog: ProgressWatchdog<Backend>;
  /** The proxy reports each attempt to it too; ends those on a backend drained past `health.drain_deadline`. */
  readonly drains: DrainDeadlines<Backend>;
  readonly #opts: FleetOptions;
  #discovery: DnsDiscovery | null = null;
  #started = false;
  readonly #prober: Prober;
  readonly #logs: LogFollowers;
  readonly #load: LoadScraper;
  #ticker: NodeJS.Timeout | null = null;
  #watchdogTicker: NodeJS.Timeout | null = null;
  #progressTimeout: number;

  constructor(config: Config, opts: FleetOptions = {}) {
    const cap =
      typeof config.routing.max_inflight_per_backend === 'number' ? config.routing.max_inflight_per_backend : 0;
    this.registry = new FleetRegistry({
      rise: config.health.rise,
      fall: config.health.fall,
      stallAfter: config.health.stall_after,
      ejectionTime: config.health.ejection_time,
      maxEjectionTime: config.health.max_ejection_time,
      failureQuiet: config.health.failure_quiet,
      defaultCap: cap,
      now: opts.now,
    });
    this.#prober = new Prober({
      registry: this.registry,
      health: config.health,
      expectModel: config.expect_model,
      apiKey: config.upstream.api_key,
    });
    this.#logs = new LogFollowers({
      registry: this.registry,
      fatalPatterns: config.health.fatal_patterns,
      onReadyLine: (backend) => this.#prober.probeNow(backend),
      pollMs: opts.logPollMs,
    });
    const registry = this.registry;
    this.watchdog = new ProgressWatchdog<Backend>({
      timeoutMs: config.health.progress_timeout,
      now: opts.now ?? Date.now,
      isReady: (backend) => backend.state === 'ready',
      hasOwnQueue: opts.hasOwnQueue ?? (() => false),
      eject: (backend, reason) => registry.apply(backend, { type: 'no_progress', reason }),
    });
    this.drains = new DrainDeadlines<Backend>({
      defaultMs: config.health.drain_deadline,
      passed: (backend, ended, ms) =>
        opts.logger?.warn(
          { backend: backend.name, ended, deadline_ms: ms },
          `drain deadline of ${backend.name} passed: ending its ${ended} request(s) still in flight`,
        ),
    });
    registry.on('transition', ({ backend, from, to }) => {
      if (to === 'draining') this.drains.drained(backend);
      else if (from === 'draining') this.drains.undrained(backend);
    });
    registry.on('removed', (backend) => {
      this.watchdog.forget(backend);
      this.drains.undrained(backend);
    });
    this.#load = new LoadScraper({
      registry: this.registry,
      intervalMs: config.routing.load_interval,
      timeoutMs: config.health.timeout,
      apiKey: config.upstream.api_key,
      onReport: (backend, load) =>
        this.watchdog.reported(backend, {
          generationTokens: load.generationTokens,
          promptTokens: load.promptTokens,
          kvUsage: load.tokenUsage,
        }),
    });
    this.#opts = opts;
    this.#progressTimeout = config.health.progress_timeout;
    this.configured = new BackendSync(this.registry);
    this.configured.apply(config.backends);
    this.setDiscovery(config.discovery);
  }

  get discovery(): DnsDiscovery | null {
    return this.#discovery;
  }

  /**
   * Starts, replaces or ends DNS discovery (reload). A new name or port reconciles the backends the
   * old one found on its first round; switching discovery off drains and removes them.
   */
  setDiscovery(config: DnsDiscoveryConfig | null): void {
    const old = this.#discovery;
    if (old !== null && config !== null && JSON.stringify(old.config) === JSON.stringify(config)) return;
    old?.stop();
    if (config === null) {
      old?.removeAll();
      this.#discovery = null;
      return;
    }
    this.#discovery = new DnsDiscovery({
      registry: this.registry,
      config,
      resolver: this.#opts.resolver,
      logger: this.#opts.logger,
      adopt: old?.sync,
    });
    if (this.#started) this.#discovery.start();
  }

  start(): void {
    this.#prober.start();
    this.#logs.start();
    this.#load.start();
    this.#ticker = setInterval(() => this.registry.tick(), TICK_MS);
    this.#ticker.unref();
    if (this.watchdog.enabled) {
      this.#watchdogTicker = setInterval(() => this.watchdog.tick(), watchdogTickMs(this.#progressTimeout));
      this.#watchdogTicker.unref();
    }
    this.#started = true;
    this.#discovery?.start();
  }

  add(backend: BackendConfig) {
    return this.configured.add(backend);
  }

  async stop(): Promise<void> {
    this.#started = false;
    this.#discovery?.stop();
    if (this.#ticker) clearInterval(this.#ticker);
    if (this.#watchdogTicker) clearInterval(this.#watchdogTicker);
    this.drains.stop();
    this.#logs.stop();
    this.#load.stop();
    await this.#prober.stop();
  }
}
