/**
 * A running fleet: the registry plus the I/O shells that feed it (prober, log followers, load
 * scraper) and the clock that re-evaluates time-based facts.
 */
import type { Logger } from 'pino';
import type { BackendConfig, Config, DnsDiscoveryConfig } from '../config/types.js';
import { BackendSync } from './backend-sync.js';
import { DnsDiscovery, type DnsResolver } from './dns-discovery.js';
import { LoadScraper } from './load-scraper.js';
import { LogFollowers } from './log-follower.js';
import { Prober } from './prober.js';
import { FleetRegistry } from './registry.js';

const TICK_MS = 1_000;

export interface FleetOptions {
  now?: () => number;
  logPollMs?: number;
  /** DNS discovery's resolver (tests inject a stub). */
  resolver?: DnsResolver;
  logger?: Logger;
}

export class Fleet {
  readonly registry: FleetRegistry;
  /** Backends from the config file and the admin API (DNS discovery owns its own). */
  readonly configured: BackendSync;
  readonly #opts: FleetOptions;
  #discovery: DnsDiscovery | null = null;
  #started = false;
  readonly #prober: Prober;
  readonly #logs: LogFollowers;
  readonly #load: LoadScraper;
  #ticker: NodeJS.Timeout | null = null;

  constructor(config: Config, opts: FleetOptions = {}) {
    const cap =
      typeof config.routing.max_inflight_per_backend === 'number' ? config.routing.max_inflight_per_backend : 0;
    this.registry = new FleetRegistry({
      rise: config.health.rise,
      fall: config.health.fall,
      stallAfter: config.health.stall_after,
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
    this.#load = new LoadScraper({
      registry: this.registry,
      intervalMs: config.routing.load_interval,
      autoCap: config.routing.max_inflight_per_backend === 'auto',
      timeoutMs: config.health.timeout,
      apiKey: config.upstream.api_key,
    });
    this.#opts = opts;
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
    this.#logs.stop();
    this.#load.stop();
    await this.#prober.stop();
  }
}
