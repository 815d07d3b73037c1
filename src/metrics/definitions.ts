/**
 * The metric families of DESIGN.md's "Prometheus metrics" table, created on one registry. Names,
 * types and labels are product surface (dashboards and alerts query them): keep them.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { BackendHistogram } from './backend-histogram.js';

/**
 * Seconds, 5 ms .. 30 min. LLM requests span a cached-prefix completion of a few tokens (tens of
 * ms) to a long non-streamed generation queued behind a full batch (many minutes). Longer ones
 * (the upstream headers timeout defaults to an hour) land in `+Inf`.
 */
export const LLM_LATENCY_BUCKETS: readonly number[] = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800,
];

/**
 * Seconds to the first token: a cached short prompt (a few ms) to a long prefill behind a full batch
 * (minutes); finer than LLM_LATENCY_BUCKETS below a second, where a healthy fleet's TTFT lies.
 */
const TTFT_BUCKETS: readonly number[] = [
  0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2.5, 5, 10, 20, 40, 80, 160, 640,
];

/**
 * Seconds between tokens: 1 ms (a small model, speculative decoding) to the multi-second stalls of
 * a preempted request or a resume; a large model's normal pace is 10-100 ms.
 */
const INTER_TOKEN_BUCKETS: readonly number[] = [
  0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1,
  2.5, 5, 10, 20,
];

/** Output tokens of one answer: powers of 2 up to 32768, past most models' output limits. */
const OUTPUT_TOKEN_BUCKETS: readonly number[] = Array.from({ length: 16 }, (_, i) => 2 ** i);

/**
 * Values brought up to date when Prometheus scrapes, not on the request path. Each family has its
 * own hook because prom-client runs a family's `collect` just before rendering that family.
 */
export interface ScrapeTimeSources {
  backendCounts(): void;
  inflight(): void;
  queueWaiting(): void;
  queueRejected(): void;
  requestCounts(): void;
  prefixDecisions(): void;
}

export function createMetricFamilies(registry: Registry, sources: ScrapeTimeSources) {
  const registers = [registry];
  return {
    backendUp: new Gauge({
      name: 'fleetgate_backend_up',
      help: '1 if the backend is ready (gets traffic), else 0.',
      labelNames: ['backend'] as const,
      registers,
    }),
    backendState: new Gauge({
      name: 'fleetgate_backend_state',
      help: "1 for the backend's current state, 0 for the other states.",
      labelNames: ['backend', 'state'] as const,
      registers,
    }),
    backends: new Gauge({
      name: 'fleetgate_backends',
      help: 'Number of backends in each state.',
      labelNames: ['state'] as const,
      registers,
      collect: () => sources.backendCounts(),
    }),
    inflight: new Gauge({
      name: 'fleetgate_backend_inflight_requests',
      help: 'Requests fleetgate has in flight to the backend.',
      labelNames: ['backend'] as const,
      registers,
      collect: () => sources.inflight(),
    }),
    backendLoad: new Gauge({
      name: 'fleetgate_backend_load',
      help: "The load routing and a fleet-wide cap compare: what the backend reported running and queued (every replica's requests) plus this replica's dispatches since, each counted routing.replicas times; fleetgate's in-flight count where it reports nothing.",
      labelNames: ['backend'] as const,
      registers,
      collect: () => sources.inflight(),
    }),
    inflightCap: new Gauge({
      name: 'fleetgate_backend_inflight_cap',
      help: 'Most requests fleetgate keeps on the backend before queueing (max_inflight_per_backend; follows the backend with auto); 0 = no cap.',
      labelNames: ['backend'] as const,
      registers,
      collect: () => sources.inflight(),
    }),
    loadProgress: new Gauge({
      name: 'fleetgate_backend_load_progress_ratio',
      help: 'Progress (0..1) of the current start-up phase that reports progress (weights, CUDA graphs); 0 otherwise.',
      labelNames: ['backend'] as const,
      registers,
    }),
    readySeconds: new Gauge({
      name: 'fleetgate_backend_ready_seconds',
      help: 'Seconds from the latest start (or first sight) of the backend to ready.',
      labelNames: ['backend'] as const,
      registers,
    }),
    requests: new Counter({
      name: 'fleetgate_requests_total',
      help: 'Proxied requests by the backend that answered (none if no backend was reached) and HTTP status.',
      labelNames: ['backend', 'code'] as const,
      registers,
      collect: () => sources.requestCounts(),
    }),
    requestDuration: new BackendHistogram({
      name: 'fleetgate_request_duration_seconds',
      help: 'Time from request arrival to the last response byte, including time in the queue.',
      buckets: LLM_LATENCY_BUCKETS,
      registers,
    }),
    timeToFirstByte: new BackendHistogram({
      name: 'fleetgate_time_to_first_byte_seconds',
      help: 'Time from request arrival to the first response byte sent to the client.',
      buckets: LLM_LATENCY_BUCKETS,
      registers,
    }),
    timeToFirstToken: new BackendHistogram({
      name: 'fleetgate_time_to_first_token_seconds',
      help: 'Time from request arrival to the first generated content reaching the client (stream="true"); for a non-streamed answer (stream="false") to the whole answer. Labels: backend, model, stream.',
      buckets: TTFT_BUCKETS,
      registers,
    }),
    timeToFirstAnswerToken: new BackendHistogram({
      name: 'fleetgate_time_to_first_answer_token_seconds',
      help: "Time from request arrival to a stream's first answer (content, not reasoning) event reaching the client; on the backend that sent it. A stream that never answered (its budget spent reasoning) observes none. Labels: backend, model.",
      buckets: TTFT_BUCKETS,
      registers,
    }),
    interTokenLatency: new BackendHistogram({
      name: 'fleetgate_inter_token_latency_seconds',
      help: 'Time between content events of a stream as the client receives them, per token; after a resume, on the backend that continued it. Labels: backend, model.',
      buckets: INTER_TOKEN_BUCKETS,
      registers,
    }),
    timePerOutputToken: new BackendHistogram({
      name: 'fleetgate_time_per_output_token_seconds',
      help: "A whole stream's first to last token over its output tokens less one; on the backend that ended it. Labels: backend, model.",
      buckets: INTER_TOKEN_BUCKETS,
      registers,
    }),
    outputTokens: new BackendHistogram({
      name: 'fleetgate_request_output_tokens',
      help: "Output tokens of a whole answer (its usage's completion_tokens, else a stream's content events); on the backend that ended it. Labels: backend, model.",
      buckets: OUTPUT_TOKEN_BUCKETS,
      registers,
    }),
    reasoningTokens: new BackendHistogram({
      name: 'fleetgate_request_reasoning_tokens',
      help: "Reasoning tokens of a whole answer that reasoned (the engine's usage figure, else a stream's reasoning events); on the backend that ended it; none for an answer without reasoning. Labels: backend, model.",
      buckets: OUTPUT_TOKEN_BUCKETS,
      registers,
    }),
    upstreamErrors: new Counter({
      name: 'fleetgate_upstream_errors_total',
      help: 'Failed upstream attempts by error kind (connect_refused, reset, headers_timeout, ...).',
      labelNames: ['backend', 'kind'] as const,
      registers,
    }),
    retries: new Counter({
      name: 'fleetgate_retries_total',
      help: 'Requests re-sent to another backend after a failed attempt on this one.',
      labelNames: ['backend'] as const,
      registers,
    }),
    streamResumes: new Counter({
      name: 'fleetgate_stream_resumes_total',
      help: 'Streams cut on this backend and continued on another, by why they were cut (reset, no_progress, error_event, closed, ...).',
      labelNames: ['backend', 'reason'] as const,
      registers,
    }),
    streamResumeFailures: new Counter({
      name: 'fleetgate_stream_resume_failures_total',
      help: 'Cut streams not continued (their error event stands), by why (n, constrained, tool_calls, limit, no_backend, ...).',
      labelNames: ['reason'] as const,
      registers,
    }),
    healthChecks: new Counter({
      name: 'fleetgate_health_checks_total',
      help: 'Readiness probes by result (pass, fail).',
      labelNames: ['backend', 'result'] as const,
      registers,
    }),
    transitions: new Counter({
      name: 'fleetgate_backend_transitions_total',
      help: 'Backend state changes.',
      labelNames: ['backend', 'from', 'to'] as const,
      registers,
    }),
    startupFailures: new Counter({
      name: 'fleetgate_startup_failure_verdicts_total',
      help: "Backends failed on a start-up failure suspect (a traceback's final exception or a runbook-grep line), by what confirmed it (exit, port_down, quiet).",
      labelNames: ['backend', 'by'] as const,
      registers,
    }),
    restarts: new Counter({
      name: 'fleetgate_backend_restarts_total',
      help: 'Restarts of an engine fleetgate launched, by reason (exit, failed, stalled, no_progress, operator).',
      labelNames: ['backend', 'reason'] as const,
      registers,
    }),
    supervised: new Gauge({
      name: 'fleetgate_backend_supervised',
      help: '1 if fleetgate launched the backend and restarts it (fleetgate launch), else 0.',
      labelNames: ['backend'] as const,
      registers,
    }),
    generatedTokens: new Counter({
      name: 'fleetgate_backend_generated_tokens_total',
      help: "Completion tokens the clients got in answers from the backend (their usage, else a stream's content events).",
      labelNames: ['backend'] as const,
      registers,
      collect: () => sources.requestCounts(),
    }),
    queueWaiting: new Gauge({
      name: 'fleetgate_queue_waiting_requests',
      help: 'Requests waiting for a ready backend with a free slot, by priority class.',
      labelNames: ['class'] as const,
      registers,
      collect: () => sources.queueWaiting(),
    }),
    queueRejected: new Counter({
      name: 'fleetgate_queue_rejected_total',
      help: 'Requests that left the wait queue without a backend (queue_full, timeout, aborted, shutdown), by priority class.',
      labelNames: ['reason', 'class'] as const,
      registers,
      collect: () => sources.queueRejected(),
    }),
    queueWait: new Histogram({
      name: 'fleetgate_queue_wait_seconds',
      help: 'Time a request that had to wait spent in the queue before it got a backend, by priority class.',
      labelNames: ['class'] as const,
      buckets: [...LLM_LATENCY_BUCKETS],
      registers,
    }),
    prefixDecisions: new Counter({
      name: 'fleetgate_prefix_decisions_total',
      help: "prefix-aware routing decisions: cache (longest prefix match), load (the load guard overrode a match), session (the session key pinned it), none (no match: least-loaded); across replicas, home (the prefix key's rendezvous home) and bound (its home was over routing.prefix.balance_factor: the next in its order).",
      labelNames: ['decision'] as const,
      registers,
      collect: () => sources.prefixDecisions(),
    }),
    prefixMatchedChars: new Counter({
      name: 'fleetgate_prefix_matched_chars_total',
      help: 'Prompt prefix characters matched on the backend chosen by cache decisions (divide by the cache decisions for the mean match length).',
      registers,
      collect: () => sources.prefixDecisions(),
    }),
    warmUpSeconds: new Gauge({
      name: 'fleetgate_warm_up_seconds',
      help: 'How long the start-up warm-up (upstream.warm_up) held /readyz back; 0 until done or when off.',
      registers,
    }),
    draining: new Gauge({
      name: 'fleetgate_draining',
      help: '1 from SIGTERM on: /readyz answers 503 while in-flight requests finish (shutdown.grace).',
      registers,
    }),
    rateLimited: new Counter({
      name: 'fleetgate_rate_limited_total',
      help: 'Requests refused with 429 by rate_limit, by what identified the client (api_key, address).',
      labelNames: ['by'] as const,
      registers,
    }),
  };
}

export type MetricFamilies = ReturnType<typeof createMetricFamilies>;
