/**
 * The serving view's figures: requests/s, tokens/s, retries, stream resumes and errors over the last minute, per
 * backend and for the fleet, plus what each backend reports running, queued and of its KV cache,
 * the straggler mark, and its thinking share (reasoning tokens over output tokens, from the token
 * histograms' sums). Fed by the proxy's `request` events and by a once-a-second sample of the
 * registry (the load scraper's latest report of each backend); the clock is injected.
 */
import type { Backend, FleetRegistry } from '../fleet/registry.js';
import type { ProxyEventBus, RequestRecord } from '../proxy/proxy-events.js';
import { SERVING_WINDOW_MS, SlidingWindow } from './rate-window.js';
import { findStragglers, tokensPerRequest } from './stragglers.js';
import { type BucketCounts, WindowQuantile } from './window-quantile.js';
import { type HistogramSum, WindowShare } from './window-share.js';

const SAMPLE_MS = 1_000;

export interface FleetServing {
  window_seconds: number;
  requests_per_second: number;
  tokens_per_second: number;
  /** Requests waiting in fleetgate's queue for a backend, now. */
  waiting: number;
  retries: number;
  /** Streams continued on another backend after a cut (proxy/stream-resume.ts). */
  resumes: number;
  errors: number;
}

export interface BackendServing {
  requests_per_second: number;
  /** From the backend's generation-token counter when it reports one, else from response `usage`. */
  tokens_per_second: number;
  /** tokens_per_second over the mean running requests of the window; null with too little traffic. */
  tokens_per_second_per_request: number | null;
  /** As the backend reports them (its `/metrics`); null when it reports none. */
  running: number | null;
  queued: number | null;
  kv_cache_usage: number | null;
  straggler: boolean;
  /** Medians over the window of its streams' time to first token and inter-token gaps, seconds; null with none. */
  ttft_p50_seconds: number | null;
  inter_token_p50_seconds: number | null;
  /**
   * Reasoning tokens over output tokens of the answers that ended on it in the window (0..1); null
   * with no output tokens counted (or the token histograms off).
   */
  thinking_share: number | null;
}

/** A backend's token histograms the serving view reads (metrics/token-metrics.ts). */
interface TokenHistograms {
  readonly firstToken: BucketCounts;
  readonly interToken: BucketCounts;
  readonly outputTokens: HistogramSum;
  readonly reasoningTokens: HistogramSum;
}

/** Where the serving view reads a backend's token-latency histograms (metrics/token-metrics.ts). */
export interface LatencySource {
  latencyOf(backend: string): TokenHistograms | undefined;
}

export interface ServingView {
  fleet: FleetServing;
  backends: Record<string, BackendServing>;
}

export interface ServingStatsOptions {
  registry: FleetRegistry;
  events: ProxyEventBus;
  /** Requests in fleetgate's wait queue now. */
  waiting: () => number;
  /** The token-latency histograms; absent, the medians stay null. */
  latency?: LatencySource;
  now?: () => number;
  windowMs?: number;
}

class BackendWindows {
  readonly requests: SlidingWindow;
  readonly usageTokens: SlidingWindow;
  readonly running: SlidingWindow;
  /** Started at the counter's first reading, so its rate covers only the time it was read. */
  counterTokens: SlidingWindow | null = null;
  lastCounter: number | null = null;
  firstToken: WindowQuantile | null = null;
  interToken: WindowQuantile | null = null;
  thinking: WindowShare | null = null;
  #sources: TokenHistograms | null = null;

  constructor(
    now: number,
    readonly windowMs: number,
  ) {
    this.requests = new SlidingWindow(now, windowMs);
    this.usageTokens = new SlidingWindow(now, windowMs);
    this.running = new SlidingWindow(now, windowMs);
  }

  readCounter(now: number, counter: number): void {
    const last = this.lastCounter;
    this.lastCounter = counter;
    // The first reading is the backend's history, not this minute's work; a drop is a restart.
    if (this.counterTokens === null || last === null) {
      this.counterTokens ??= new SlidingWindow(now, this.windowMs);
      return;
    }
    this.counterTokens.add(now, counter >= last ? counter - last : counter);
  }

  /** Copies the token histograms' counts and sums (new ones when the backend's series were rebound). */
  sampleLatency(now: number, sources: TokenHistograms | undefined): void {
    if (sources === undefined) return;
    const old = this.#sources;
    if (
      old?.firstToken !== sources.firstToken ||
      old.interToken !== sources.interToken ||
      old.outputTokens !== sources.outputTokens ||
      old.reasoningTokens !== sources.reasoningTokens
    ) {
      this.#sources = sources;
      this.firstToken = new WindowQuantile(sources.firstToken, this.windowMs);
      this.interToken = new WindowQuantile(sources.interToken, this.windowMs);
      this.thinking = new WindowShare(sources.reasoningTokens, sources.outputTokens, this.windowMs);
    }
    this.firstToken?.sample(now);
    this.interToken?.sample(now);
    this.thinking?.sample(now);
  }

  tokensPerSecond(now: number): number {
    return (this.counterTokens ?? this.usageTokens).rate(now);
  }
}

/** Anything but a clean answer or a client that left: fleetgate's errors and the backends' 5xx. */
export function isServingError(record: RequestRecord): boolean {
  if (record.outcome === 'client_abort') return false;
  return record.outcome !== 'ok' || record.status >= 500;
}

function roundOrNull(value: number | null, digits: number): number | null {
  return value === null ? null : round(value, digits);
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

export class ServingStats {
  readonly #registry: FleetRegistry;
  readonly #events: ProxyEventBus;
  readonly #waiting: () => number;
  readonly #latency: LatencySource | null;
  readonly #now: () => number;
  readonly #windowMs: number;
  readonly #backends = new Map<string, BackendWindows>();
  readonly #requests: SlidingWindow;
  readonly #retries: SlidingWindow;
  readonly #resumes: SlidingWindow;
  readonly #errors: SlidingWindow;
  #timer: NodeJS.Timeout | null = null;
  #samples = 0;

  constructor(opts: ServingStatsOptions) {
    this.#registry = opts.registry;
    this.#events = opts.events;
    this.#waiting = opts.waiting;
    this.#latency = opts.latency ?? null;
    this.#now = opts.now ?? Date.now;
    this.#windowMs = opts.windowMs ?? SERVING_WINDOW_MS;
    const now = this.#now();
    this.#requests = new SlidingWindow(now, this.#windowMs);
    this.#retries = new SlidingWindow(now, this.#windowMs);
    this.#resumes = new SlidingWindow(now, this.#windowMs);
    this.#errors = new SlidingWindow(now, this.#windowMs);
  }

  /** Subscribes and samples every second until `stop()`. */
  start(): void {
    if (this.#timer !== null) return;
    this.#events.on('request', this.#onRequest);
    this.#registry.on('added', this.#onAdded);
    this.#registry.on('removed', this.#onRemoved);
    const now = this.#now();
    for (const backend of this.#registry.list()) this.#windows(backend.name, now);
    this.#timer = setInterval(() => this.sample(), SAMPLE_MS).unref();
  }

  stop(): void {
    this.#events.off('request', this.#onRequest);
    this.#registry.off('added', this.#onAdded);
    this.#registry.off('removed', this.#onRemoved);
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }

  /** Samples taken so far: once this grows past a count read at some moment, the view has sampled after it. */
  get samples(): number {
    return this.#samples;
  }

  /** Reads each backend's running requests and generation-token counter; called once a second. */
  sample(): void {
    this.#samples++;
    const now = this.#now();
    for (const backend of this.#registry.list()) {
      const windows = this.#windows(backend.name, now);
      const reported = backend.reported;
      windows.running.add(now, reported?.running ?? backend.inflight);
      const counter = reported?.generationTokens ?? null;
      if (counter !== null) windows.readCounter(now, counter);
      if (this.#latency !== null) windows.sampleLatency(now, this.#latency.latencyOf(backend.name));
    }
  }

  view(): ServingView {
    const now = this.#now();
    const list = this.#registry.list();
    const samples = list.map((backend) => {
      const windows = this.#windows(backend.name, now);
      return {
        name: backend.name,
        tokensPerSecond: windows.tokensPerSecond(now),
        meanRunning: windows.running.mean(now),
      };
    });
    const stragglers = findStragglers(samples);
    const backends: Record<string, BackendServing> = {};
    let tokens = 0;
    list.forEach((backend, i) => {
      const sample = samples[i];
      tokens += sample.tokensPerSecond;
      const perRequest = tokensPerRequest(sample);
      const windows = this.#windows(backend.name, now);
      backends[backend.name] = {
        requests_per_second: round(windows.requests.rate(now), 2),
        tokens_per_second: round(sample.tokensPerSecond, 1),
        tokens_per_second_per_request: perRequest === null ? null : round(perRequest, 1),
        ...reportedLoad(backend),
        straggler: stragglers.has(backend.name),
        ttft_p50_seconds: roundOrNull(windows.firstToken?.quantile(0.5) ?? null, 4),
        inter_token_p50_seconds: roundOrNull(windows.interToken?.quantile(0.5) ?? null, 4),
        thinking_share: roundOrNull(windows.thinking?.share() ?? null, 3),
      };
    });
    return {
      fleet: {
        window_seconds: this.#windowMs / 1000,
        requests_per_second: round(this.#requests.rate(now), 2),
        tokens_per_second: round(tokens, 1),
        waiting: this.#waiting(),
        retries: this.#retries.sum(now),
        resumes: this.#resumes.sum(now),
        errors: this.#errors.sum(now),
      },
      backends,
    };
  }

  #windows(name: string, now: number): BackendWindows {
    let windows = this.#backends.get(name);
    if (!windows) {
      windows = new BackendWindows(now, this.#windowMs);
      this.#backends.set(name, windows);
    }
    return windows;
  }

  readonly #onRequest = (record: RequestRecord): void => {
    const now = this.#now();
    this.#requests.add(now);
    if (record.retries > 0) this.#retries.add(now, record.retries);
    if (record.resumes > 0) this.#resumes.add(now, record.resumes);
    if (isServingError(record)) this.#errors.add(now);
    // A last record can arrive after its backend was removed (gateway-metrics.ts): not counted per backend then.
    if (record.backend === null || this.#registry.get(record.backend) === undefined) return;
    const windows = this.#windows(record.backend, now);
    windows.requests.add(now);
    if (record.completionTokens !== null) windows.usageTokens.add(now, record.completionTokens);
  };

  readonly #onAdded = (backend: Backend): void => {
    this.#windows(backend.name, this.#now());
  };

  readonly #onRemoved = (backend: Backend): void => {
    this.#backends.delete(backend.name);
  };
}

function reportedLoad(backend: Backend): Pick<BackendServing, 'running' | 'queued' | 'kv_cache_usage'> {
  const reported = backend.reported;
  if (reported === null) return { running: null, queued: null, kv_cache_usage: null };
  return {
    running: reported.running,
    queued: reported.queued,
    kv_cache_usage: reported.tokenUsage === null ? null : round(reported.tokenUsage, 3),
  };
}
