/**
 * Public types of the simulated SGLang / vLLM server. Behaviour follows
 * docs/sglang-vllm-behaviour.md sections 1-5 (vLLM: section 6).
 */
import type { SimKvEventsOptions } from './kv-publisher.js';
import type { ReasoningParserName, VllmReasoningField } from './thinking.js';

/**
 * What the simulated process is doing.
 * - `loading_weights` .. `capturing_cuda_graphs`: the port is closed (SGLang builds the scheduler before uvicorn starts, ref 1.1).
 * - `warming_up`: HTTP is up, the server's own warm-up request runs; new-version `/health` answers 503 (ref 1.3).
 * - `failed`: the scheduler died but the HTTP process lives on (issue #6624); the port stays open.
 * - `hung`: accepts connections but never answers (or, during start-up, prints nothing more).
 * - `exited`: the process is gone after a fatal error (port closed); `stopped`: never started or `stop()`ped.
 */
export type SimStatus =
  | 'stopped'
  | 'loading_weights'
  | 'allocating_kv_cache'
  | 'capturing_cuda_graphs'
  | 'warming_up'
  | 'ready'
  | 'failed'
  | 'hung'
  | 'exited';

export type SimFailure =
  /** `RuntimeError: Not enough memory...` right after `Load weight end`; the process exits, the port never opens. */
  | { mode: 'not_enough_memory' }
  /** `Exception: Capture cuda graph failed: CUDA out of memory...` during capture (at batch `atBatch`, default half-way); exits. */
  | { mode: 'cuda_oom_capture'; atBatch?: number }
  /** The capture bar stops at `atBatch` and nothing more is printed; the port never opens. */
  | { mode: 'hang_capture'; atBatch?: number }
  /** `afterMs` after ready: `Scheduler hit an exception`, the port closes and every connection is dropped. */
  | { mode: 'crash_after_ready'; afterMs: number }
  /** `afterMs` after ready: scheduler exception logged, HTTP stays up; generation hangs, old `/health` stays 200. */
  | { mode: 'scheduler_dead_http_alive'; afterMs: number }
  /** `afterMs` after ready: accepts TCP, never answers anything. */
  | { mode: 'hang_after_ready'; afterMs: number }
  /**
   * `afterMs` after ready, one DP rank dies: a `fraction` (default 0.5) of new generation requests
   * (every other one at 0.5, as DP round-robin sends them) hang forever with no byte, not even
   * headers; `/health`, `/metrics` and the other requests keep working (sgl-project/sglang#6624).
   */
  | { mode: 'dp_rank_dead'; afterMs: number; fraction?: number }
  /** `Initialization failed. warmup error: ...` once HTTP is up, then the process exits. */
  | { mode: 'warmup_failure' };

export type SimFailureMode = SimFailure['mode'];

export const FAILURE_MODES: readonly SimFailureMode[] = [
  'not_enough_memory',
  'cuda_oom_capture',
  'hang_capture',
  'crash_after_ready',
  'scheduler_dead_http_alive',
  'hang_after_ready',
  'dp_rank_dead',
  'warmup_failure',
];

/** Start-up timings, all in milliseconds except the counts. */
export interface SimTiming {
  /** Before the first log line (process spawn, imports). */
  startDelayMs: number;
  /** Number of checkpoint shards in the `Loading safetensors checkpoint shards` bar. */
  shards: number;
  shardMs: number;
  /** KV-cache allocation (between `Load weight end` and `Memory pool end`). */
  kvMs: number;
  /** Number of batch sizes in the `Capturing batches` bar. */
  graphBatches: number;
  graphBatchMs: number;
  /** From `max_total_num_tokens=...` to `Uvicorn running on ...` (port opens at the end). */
  httpMs: number;
  /** Warm-up: half before `GET /model_info`, half as the first forward's extra latency. */
  warmupMs: number;
  /** Latency of a passing `/health` probe once ready (real SGLang sleeps 1 s before its first check, ref 1.3). */
  healthMs: number;
  /** A `/health` probe against a dead scheduler fails (503) after this (SGLANG_HEALTH_CHECK_TIMEOUT, 20 s). */
  healthTimeoutMs: number;
}

export interface SimEngineOptions {
  /** Continuous-batching cap (`max_running_requests`); beyond it requests queue. */
  maxRunningRequests: number;
  /** KV-cache pool in tokens (`max_total_num_tokens`). */
  maxTotalNumTokens: number;
  /** Base time of one decode step; 0 = as fast as possible (one step per event-loop turn). */
  tokenMs: number;
  /** Step time = tokenMs * (1 + batchPenalty * running) * slowdown. */
  batchPenalty: number;
  slowdown: number;
  /** Prefill speed; a step that admits requests takes promptTokens / prefillTokensPerMs longer. */
  prefillTokensPerMs: number;
  /**
   * SGLang's `chunked_prefill_size`: at most this many prompt tokens are prefilled per step, between
   * decode steps of the running requests, and the KV use grows chunk by chunk; 0 = a whole prompt
   * in its admission step.
   */
  chunkedPrefillTokens: number;
  /** Output length when the request names none. */
  defaultMaxTokens: number;
  /** Tokens per prefix-cache page (SGLang `--page-size`, vLLM's block size); only full pages are cached. */
  pageSize: number;
  /**
   * SGLang's `--enable-priority-scheduling`: the waiting queue is admitted in order of each request's
   * `priority`, larger first, then arrival (a request without one counts as 0, as with
   * `--default-priority-value 0`). Without it `priority` is ignored. With it, a waiting request may
   * also preempt running ones (engine.ts, `#preemptFor`), as SGLang does unless started with
   * `--disable-priority-preemption`.
   */
  priorityScheduling?: boolean;
  /**
   * SGLang's `--priority-scheduling-preemption-threshold` (default 10): a waiting request preempts a
   * running one only when its priority is larger by more than this.
   */
  priorityPreemptionThreshold?: number;
}

export interface SimOptions {
  port: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Label, e.g. `gpu3`; its digits become the GPU id in log lines. Default `sim:<port>`. */
  name?: string;
  /** `model_path`; default `meta-llama/Llama-3.1-8B-Instruct`. */
  model?: string;
  /** vllm: the port opens only once the engine is built, `/health` is 200 at once, vLLM log lines. */
  kind?: 'sglang' | 'vllm';
  /** old = v0.4: `/health` 200 during warm-up, old log spellings, `/get_model_info` only. Default new. */
  version?: 'new' | 'old';
  /** Log file. `start()` appends; `restart()` truncates, like a relaunch with `> log`. */
  logFile?: string | null;
  timing?: Partial<SimTiming>;
  engine?: Partial<SimEngineOptions>;
  failure?: SimFailure | null;
  /** After the process exits on a fatal error, relaunch it (fresh log, without the failure) after this delay. */
  restartAfterMs?: number | null;
  /** Default true; false makes `/metrics` 404 like SGLang without `--enable-metrics`. */
  enableMetrics?: boolean;
  /**
   * SGLang's `--model-path`: a model directory (Hugging Face layout) whose chat template renders
   * chat prompts and whose tokenizer counts tokens and reads token-id prompts. Null: the
   * simulator's stand-ins (about four characters a token).
   */
  modelPath?: string | null;
  /** `--reasoning-parser`: thinking mode, the answer's reasoning split from its content (thinking.ts). */
  reasoningParser?: ReasoningParserName | null;
  /** Reasoning words per answer, MIN-MAX (default 32-96); each prompt gets its own, always the same. */
  thinkTokens?: readonly [number, number];
  /** vLLM's reasoning field, by version (default `reasoning`, the newest). */
  vllmReasoningField?: VllmReasoningField;
  /**
   * SGLang's `--kv-events-config` (publisher `zmq`): publish the prefix cache's KV events
   * (kv-publisher.ts) and describe them in `/server_info`'s `kv_events`. Null: none.
   */
  kvEvents?: SimKvEventsOptions | null;
  /** Like `--api-key`: 401 `{"error": "Unauthorized"}` without `Authorization: Bearer <key>` (health and metrics exempt). */
  apiKey?: string | null;
}

export interface SimCounters {
  /** Requests received except the info/health family (see INFO_PATHS). */
  requests: number;
  /** Of those, how many arrived while the status was not `ready` (e.g. during warm-up). */
  requestsWhileNotReady: number;
  /** Every request received, by path (health and info included). */
  byPath: Record<string, number>;
  /** Generation requests whose client went away before completion (each is then aborted). */
  clientDisconnects: number;
  /** Generation requests aborted (client gone or `/abort_request`). */
  aborted: number;
  /** Generation requests answered completely. */
  completed: number;
  /** Times a running request was retracted to the queue because the KV pool overflowed. */
  retractions: number;
  /** Tokens generated for clients (the server's own warm-up excluded). */
  generatedTokens: number;
  /** Prompt tokens of the requests answered completely, and how many of them came from the prefix cache. */
  promptTokens: number;
  cachedTokens: number;
  /** `dp_rank_dead`: generation requests that landed on the dead rank (held forever, no byte). */
  deadRank: number;
  /** Of those, the streamed ones. */
  deadRankStreams: number;
  /** Streamed answers under way now: their headers went out and they have not ended. */
  openStreams: number;
  /** Generation requests held now (running or queued), and the most ever held at once (bench:balance's cap check). */
  held: number;
  peakHeld: number;
}

/** Paths that do not count in `SimCounters.requests`. */
export const INFO_PATHS: ReadonlySet<string> = new Set([
  '/health',
  '/health_generate',
  '/metrics',
  '/get_load',
  '/model_info',
  '/get_model_info',
  '/server_info',
  '/get_server_info',
  '/v1/models',
]);

export function newCounters(): SimCounters {
  return {
    requests: 0,
    requestsWhileNotReady: 0,
    byPath: {},
    clientDisconnects: 0,
    aborted: 0,
    completed: 0,
    retractions: 0,
    generatedTokens: 0,
    promptTokens: 0,
    cachedTokens: 0,
    deadRank: 0,
    deadRankStreams: 0,
    openStreams: 0,
    held: 0,
    peakHeld: 0,
  };
}
