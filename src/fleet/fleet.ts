/**
 * A running fleet: the registry plus the I/O shells that feed it (prober, log followers, load
 * scraper) and the clock that re-evaluates time-based facts.
 */
import type { BackendConfig, Config } from '../config/types.js';
import { LoadScraper } from './load-scraper.js';
import { LogFollowers } from './log-follower.js';
import { Prober } from './prober.js';
import { FleetRegistry } from './registry.js';

const TICK_MS = 1_000;

export interface FleetOptions {
  now?: () => number;
  logPollMs?: number;
}

export class Fleet {
  readonly registry: FleetRegistry;
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
    for (const backend of config.backends) this.registry.add(backend);
  }

  start(): void {
    this.#prober.start();
    this.#logs.start();
    this.#load.start();
    this.#ticker = setInterval(() => this.registry.tick(), TICK_MS);
    this.#ticker.unref();
  }

  add(backend: BackendConfig) {
    return this.registry.add(backend);
  }

  async stop(): Promise<void> {
    if (this.#ticker) clearInterval(this.#ticker);
    this.#logs.stop();
    this.#load.stop();
    await this.#prober.stop();
  }
}
