/**
 * fleetgate's Prometheus metrics: its own prom-client registry (not the global one, so several
 * gateways in one process, as in tests, do not collide), fed by the fleet registry's and the
 * proxy's events. Gauges that mirror live counts (in-flight, queue) are read at scrape time, and
 * the request and token counts that request-series.ts keeps in plain numbers are added to their counters then.
 */
import { collectDefaultMetrics, Registry } from 'prom-client';
import type { HostPort } from '../config/types.js';
import { BACKEND_STATES, type BackendState, type ProbeResult } from '../fleet/backend-lifecycle.js';
import type { Backend, FleetRegistry, RestartReason, TransitionEvent } from '../fleet/registry.js';
import type { ProxyEventBus, RequestRecord } from '../proxy/proxy-events.js';
import { ADMISSION_FAILURES, type AdmissionFailure, type WaitQueue } from '../routing/queue/wait-queue.js';

/** What the metrics read of the wait queues (one, or one per model). */
export type QueueCounts = Pick<WaitQueue, 'waiting' | 'classNames' | 'waitingIn' | 'rejectedIn' | 'observeWaits'> &
  Partial<ModelQueueCounts>;

import { RESUME_REFUSALS } from '../proxy/continuation.js';
import { PREFIX_DECISIONS, type PrefixDecision, type PrefixStats } from '../routing/policies/prefix-aware.js';
import { BackendSeries } from './backend-series.js';
import { type BatchSource, registerBatchMetrics } from './batch-metrics.js';
import { createMetricFamilies, type MetricFamilies } from './definitions.js';
import { MetricsServer } from './metrics-server.js';
import { ModelMetrics, type ModelQueueCounts } from './model-metrics.js';
import { RequestSeries } from './request-series.js';
import { TokenMetrics } from './token-metrics.js';

/** `backend` label of requests that reached no backend (queue timeout, queue full, client gone). */
const NO_BACKEND = 'none';

export class GatewayMetrics {
  readonly registry = new Registry();
  readonly #fleet: FleetRegistry;
  readonly #events: ProxyEventBus;
  readonly #queue: QueueCounts;
  readonly #families: MetricFamilies;
  readonly #backends = new Map<string, BackendSeries>();
  readonly #noBackend: RequestSeries;
  /** Per class, rejections already added to the counter. */
  readonly #rejectedSeen = new Map<string, Record<AdmissionFailure, number>>();
  readonly #models: ModelMetrics;
  readonly #tokens: TokenMetrics;
  readonly #prefix: { readonly stats: PrefixStats } | null;
  readonly #prefixSeen = {
    decisions: Object.fromEntries(PREFIX_DECISIONS.map((d) => [d, 0])) as Record<PrefixDecision, number>,
    matchedChars: 0,
  };
  #server: MetricsServer | null = null;
  readonly #replicas: number;

  /**
   * `prefix`: the prefix-aware policy, whose decisions are counted; null with another policy.
   * `replicas`: `routing.replicas`, as routing counts a backend's load.
   */
  constructor(
    fleet: FleetRegistry,
    events: ProxyEventBus,
    queue: QueueCounts,
    prefix: { readonly stats: PrefixStats } | null = null,
    replicas = 1,
  ) {
    this.#replicas = replicas;
    this.#fleet = fleet;
    this.#events = events;
    this.#queue = queue;
    this.#prefix = prefix;
    collectDefaultMetrics({ register: this.registry });
    this.#families = createMetricFamilies(this.registry, {
      backendCounts: () => this.#collectBackendCounts(),
      inflight: () => {
        for (const series of this.#backends.values()) series.collectInflight();
      },
      queueWaiting: () => {
        for (const name of this.#queue.classNames)
          this.#families.queueWaiting.set({ class: name }, this.#queue.waitingIn(name));
      },
      queueRejected: () => this.#collectRejected(),
      prefixDecisions: () => this.#collectPrefixDecisions(),
      requestCounts: () => {
        this.#noBackend.flush();
        for (const series of this.#backends.values()) series.requests.flush();
      },
    });
    this.#noBackend = new RequestSeries(this.#families, NO_BACKEND, { zeroed: false });
    this.#tokens = new TokenMetrics(this.#families, fleet);
    events.tokens = this.#tokens;
    this.#models = new ModelMetrics(this.registry, fleet, queue.waitingByModel ? (queue as ModelQueueCounts) : null);
    this.#collectRejected();
    const queueWait = this.#families.queueWait;
    // Every class's series from the start, so a dashboard's quantile has buckets before the first wait.
    for (const name of queue.classNames) queueWait.zero({ class: name });
    queue.observeWaits((name, ms) => queueWait.observe({ class: name }, ms / 1000));

    for (const backend of fleet.list()) this.#onAdded(backend);
    fleet.on('added', this.#onAdded);
    fleet.on('removed', this.#onRemoved);
    fleet.on('transition', this.#onTransition);
    fleet.on('change', this.#onChange);
    fleet.on('probe', this.#onProbe);
    fleet.on('restart', this.#onRestart);
    events.on('request', this.#onRequest);
    events.on('upstream_error', this.#onUpstreamError);
    events.on('retry', this.#onRetry);
    events.on('stream_resume', this.#onResume);
    events.on('stream_resume_failed', this.#onResumeFailed);
    // Zero from the start, so that dashboards and alerts find the series before the first refusal.
    for (const by of ['api_key', 'address'] as const) this.#families.rateLimited.inc({ by }, 0);
    for (const reason of RESUME_REFUSALS) this.#families.streamResumeFailures.inc({ reason }, 0);
    events.on('rate_limited', this.#onRateLimited);
  }

  /** The token-latency series of each backend, for the serving view's quantiles. */
  get tokenLatency(): TokenMetrics {
    return this.#tokens;
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** Adds the Batch API's series. */
  observeBatches(source: BatchSource): void {
    registerBatchMetrics(this.registry, source);
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }

  /** URL of the separate metrics listener, once `listen()` resolved. */
  get url(): string | null {
    return this.#server?.url ?? null;
  }

  /** Serves `/metrics` on a separate address too (`metrics_listen`). */
  /** The start-up warm-up is done (it took `seconds`). */
  warmedUp(seconds: number): void {
    this.#families.warmUpSeconds.set(seconds);
  }

  /** SIGTERM: the process drains. */
  draining(): void {
    this.#families.draining.set(1);
  }

  async listen(address: HostPort): Promise<void> {
    if (this.#server) throw new Error(`metrics already listening on ${this.#server.url}`);
    this.#server = await MetricsServer.start(address, this);
  }

  async close(): Promise<void> {
    const fleet = this.#fleet;
    fleet.off('added', this.#onAdded);
    fleet.off('removed', this.#onRemoved);
    fleet.off('transition', this.#onTransition);
    fleet.off('change', this.#onChange);
    fleet.off('probe', this.#onProbe);
    fleet.off('restart', this.#onRestart);
    this.#events.off('request', this.#onRequest);
    this.#events.off('upstream_error', this.#onUpstreamError);
    this.#events.off('retry', this.#onRetry);
    this.#events.off('rate_limited', this.#onRateLimited);
    this.#events.off('stream_resume', this.#onResume);
    this.#events.off('stream_resume_failed', this.#onResumeFailed);
    this.#models.close();
    this.#tokens.close();
    if (this.#events.tokens === this.#tokens) this.#events.tokens = null;
    const server = this.#server;
    this.#server = null;
    await server?.close();
  }

  readonly #onAdded = (backend: Backend): void => {
    this.#backends.get(backend.name)?.remove();
    this.#backends.set(backend.name, new BackendSeries(this.#families, backend, this.#replicas));
  };

  readonly #onRemoved = (backend: Backend): void => {
    const series = this.#backends.get(backend.name);
    if (series?.backend !== backend) return;
    series.remove();
    this.#backends.delete(backend.name);
  };

  readonly #onTransition = ({ backend, from, to, cause }: TransitionEvent): void => {
    this.#series(backend.name)?.transition(from, to, cause);
  };

  readonly #onChange = (backend: Backend): void => {
    const series = this.#series(backend.name);
    series?.snapshotChanged(backend.lifecycle.snapshot);
    series?.supervisionChanged();
  };

  readonly #onRestart = (backend: Backend, reason: RestartReason): void => {
    this.#series(backend.name)?.restarted(reason);
  };

  readonly #onProbe = (backend: Backend, result: ProbeResult): void => {
    this.#series(backend.name)?.probe(result.ok);
  };

  readonly #onRequest = (record: RequestRecord): void => {
    const series = record.backend === null ? this.#noBackend : this.#series(record.backend)?.requests;
    series?.record(record);
  };

  readonly #onUpstreamError = ({ backend, kind }: { backend: string; kind: string }): void => {
    this.#series(backend)?.requests.upstreamError(kind);
  };

  readonly #onRetry = ({ backend }: { backend: string }): void => {
    this.#series(backend)?.requests.retry();
  };

  readonly #onRateLimited = ({ by }: { by: 'api_key' | 'address' }): void => {
    this.#families.rateLimited.inc({ by });
  };

  readonly #onResume = ({ backend, reason }: { backend: string; reason: string }): void => {
    this.#series(backend)?.resumed(reason);
  };

  readonly #onResumeFailed = ({ reason }: { reason: string }): void => {
    this.#families.streamResumeFailures.inc({ reason });
  };

  /**
   * Undefined for a backend already removed: the proxy reports a request after releasing its slot,
   * and the release may complete a removal, so a last record can arrive after `removed`. Counting it
   * would re-create the series of a backend that is gone.
   */
  #series(name: string): BackendSeries | undefined {
    return this.#backends.get(name);
  }

  #collectBackendCounts(): void {
    const counts = new Map<BackendState, number>(BACKEND_STATES.map((state) => [state, 0]));
    for (const series of this.#backends.values()) counts.set(series.state, (counts.get(series.state) ?? 0) + 1);
    for (const [state, count] of counts) this.#families.backends.set({ state }, count);
  }

  /** The policy counts its own decisions; the counters catch up with them at each scrape. */
  #collectPrefixDecisions(): void {
    // With another policy the series stay at 0: they exist, so queries on them select something.
    const { decisions, matchedChars } = this.#prefix?.stats ?? this.#prefixSeen;
    const seen = this.#prefixSeen;
    for (const decision of Object.keys(seen.decisions) as PrefixDecision[]) {
      this.#families.prefixDecisions.inc({ decision }, decisions[decision] - seen.decisions[decision]);
      seen.decisions[decision] = decisions[decision];
    }
    this.#families.prefixMatchedChars.inc(matchedChars - seen.matchedChars);
    seen.matchedChars = matchedChars;
  }

  /** The queue counts its own rejections; the counter catches up with them at each scrape. */
  #collectRejected(): void {
    for (const name of this.#queue.classNames) {
      const rejected = this.#queue.rejectedIn(name);
      let seen = this.#rejectedSeen.get(name);
      if (seen === undefined) {
        seen = { queue_full: 0, timeout: 0, aborted: 0, shutdown: 0 };
        this.#rejectedSeen.set(name, seen);
      }
      for (const reason of ADMISSION_FAILURES) {
        const delta = rejected[reason] - seen[reason];
        seen[reason] = rejected[reason];
        this.#families.queueRejected.inc({ reason, class: name }, Math.max(0, delta));
      }
    }
  }
}
