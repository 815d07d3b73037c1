/**
 * Backend-reported load: scrapes each ready backend's `/metrics` at a short interval so that
 * least-loaded compares what the backend really runs and queues (several fleetgate replicas, or
 * other clients, also load it), refined by fleetgate's own dispatches since the scrape. It only
 * reads and reports (`FleetRegistry.reportLoad`); routing decides what the figures mean.
 */
import { Client } from 'undici';
import { type BackendLoad, parseBackendLoad, parseMaxRunning } from './backend-metrics.js';
import type { Backend, FleetRegistry } from './registry.js';

export interface LoadScraperOptions {
  registry: FleetRegistry;
  /** 0 disables scraping. */
  intervalMs: number;
  timeoutMs: number;
  apiKey: string | null;
  /** Each successful read, for the progress watchdog. */
  onReport?: (backend: Backend, load: BackendLoad) => void;
}

type Report = BackendLoad & { maxRunning: number | null };

/** A scrape that got no answer (refused, reset, timed out): no report at all, unlike a backend without figures. */
const FAILED = Symbol('scrape failed');

export class LoadScraper {
  readonly #opts: LoadScraperOptions;
  readonly #clients = new Map<Backend, Client>();
  /** Backends whose `/metrics` is missing (404): they fall back to in-flight counts. */
  readonly #unsupported = new WeakSet<Backend>();
  /** Each backend's reported `max_running_requests` (null: not reported), read once per admission. */
  readonly #maxRunning = new WeakMap<Backend, number | null>();
  /** Each backend's state changes so far: a scrape that straddles one read a process that is gone. */
  readonly #epochs = new WeakMap<Backend, number>();
  /** Scrapes under way: the one made on admission and the interval's never overlap for a backend. */
  readonly #scraping = new WeakSet<Backend>();
  #timer: NodeJS.Timeout | null = null;
  #running = false;

  constructor(opts: LoadScraperOptions) {
    this.#opts = opts;
    opts.registry.on('removed', (backend) => {
      void this.#clients.get(backend)?.close();
      this.#clients.delete(backend);
    });
    opts.registry.on('transition', ({ backend, to }) => {
      this.#epochs.set(backend, (this.#epochs.get(backend) ?? 0) + 1);
      if (to === 'ready') {
        if (this.#timer !== null) void this.#scrape(backend);
        return;
      }
      // A restarted backend is a new process: its `max_running_requests` is read afresh.
      this.#maxRunning.delete(backend);
    });
  }

  start(): void {
    if (this.#opts.intervalMs <= 0) return;
    this.#timer = setInterval(() => void this.scrapeAll(), this.#opts.intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    for (const client of this.#clients.values()) void client.destroy();
    this.#clients.clear();
  }

  async scrapeAll(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    try {
      await Promise.all(this.#opts.registry.ready.map((backend) => this.#scrape(backend)));
    } finally {
      this.#running = false;
    }
  }

  async #get(client: Client, path: string): Promise<{ status: number; body: string }> {
    const headers: Record<string, string> = {};
    if (this.#opts.apiKey !== null) headers.authorization = `Bearer ${this.#opts.apiKey}`;
    const res = await client.request({
      method: 'GET',
      path,
      headers,
      headersTimeout: this.#opts.timeoutMs,
      bodyTimeout: this.#opts.timeoutMs,
    });
    return { status: res.statusCode, body: await res.body.text() };
  }

  async #scrape(backend: Backend): Promise<void> {
    if (this.#scraping.has(backend)) return;
    this.#scraping.add(backend);
    try {
      // fleetgate's count when the GET leaves, not when the answer arrives: a request sent while the
      // scrape is under way is not in what the backend reports, so it must count as sent since.
      const inflightAtScrape = backend.inflight;
      const epoch = this.#epochs.get(backend);
      const report = await this.#read(backend);
      // Its state changed meanwhile (a crash, a restart): the figures, or the failure, are of the
      // process before, and would tell the cap controller (which just marked it unread) nothing true.
      if (report === FAILED || this.#epochs.get(backend) !== epoch) return;
      this.#opts.registry.reportLoad(backend, report, inflightAtScrape);
      if (report !== null) this.#opts.onReport?.(backend, report);
    } finally {
      this.#scraping.delete(backend);
    }
  }

  /** The backend's load and `max_running_requests`; null when it reports none, FAILED when it did not answer. */
  async #read(backend: Backend): Promise<Report | null | typeof FAILED> {
    if (this.#unsupported.has(backend)) return null;
    let client = this.#clients.get(backend);
    if (!client) {
      client = new Client(backend.url, { connect: { timeout: this.#opts.timeoutMs } });
      this.#clients.set(backend, client);
    }
    try {
      const metrics = await this.#get(client, '/metrics');
      if (metrics.status === 404) {
        this.#unsupported.add(backend);
        return null;
      }
      if (metrics.status !== 200) return null;
      const load = parseBackendLoad(metrics.body, backend.config.kind);
      if (load === null) return null;
      // Read once per admission: the adaptive cap and least-loaded's idle-slot rule both need it.
      let maxRunning = this.#maxRunning.get(backend);
      if (maxRunning === undefined) {
        const info = await this.#get(client, '/server_info');
        maxRunning = info.status === 200 ? parseMaxRunning(info.body) : null;
        this.#maxRunning.set(backend, maxRunning);
      }
      return { ...load, maxRunning };
    } catch {
      // The prober and the proxy judge health; a failed scrape only leaves the last figures stale. It
      // is not "reports none" (null), which lifts the cap of a backend not read yet: a backend that
      // crashed during its scrape, or whose first scrape after a restart timed out, would come back
      // uncapped and take the whole central queue at once (issue #28's fault bench).
      return FAILED;
    }
  }
}
