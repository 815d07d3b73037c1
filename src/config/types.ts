/** The validated, fully-defaulted configuration. Durations are milliseconds, sizes bytes. */

export type BackendKind = 'sglang' | 'vllm' | 'openai';
export const BACKEND_KINDS: readonly BackendKind[] = ['sglang', 'vllm', 'openai'];

export type PolicyName = 'least-loaded' | 'round-robin' | 'power-of-two' | 'prefix-aware' | 'kv-aware' | 'auto';
export const POLICY_NAMES: readonly PolicyName[] = [
  'least-loaded',
  'round-robin',
  'power-of-two',
  'prefix-aware',
  'kv-aware',
  'auto',
];
/** `routing.cap_scope`: whose requests a backend's cap counts (docs/replicas.md). */
export type CapScope = 'fleet' | 'replica';
export const CAP_SCOPES: readonly CapScope[] = ['fleet', 'replica'];

export type RateLimitKey = 'api_key' | 'address';
export const RATE_LIMIT_KEYS: readonly RateLimitKey[] = ['api_key', 'address'];

export interface BackendConfig {
  /** Origin only, e.g. `http://127.0.0.1:30000` (no trailing slash). */
  url: string;
  /** Label in metrics and status; default `host:port`. */
  name: string;
  kind: BackendKind;
  /** Log file to follow, or null. */
  log: string | null;
}

export interface PriorityClassConfig {
  name: string;
  /** null: `queue.max_waiting`. */
  max_waiting: number | null;
  /** null: `queue.timeout` (which, under the adaptive cap, bounds only a wait while no backend is ready). */
  timeout: number | null;
  /** Requests with one of these API keys and no `X-Fleetgate-Priority` header are of this class. */
  api_keys: string[];
  /** Sent as the request's `priority` to the backend (SGLang `--enable-priority-scheduling`); null: none. */
  backend_priority: number | null;
}

export interface HostPort {
  host: string;
  port: number;
}

export interface DnsDiscoveryConfig {
  dns: string;
  port: number;
  interval: number;
  kind: BackendKind;
}

export interface Config {
  listen: HostPort;
  /** Optional separate listener for /metrics. */
  metrics_listen: HostPort | null;
  backends: BackendConfig[];
  expect_model: string | null;
  /** Names clients use → the served model name each stands for (routing by model). */
  models: Record<string, string>;
  /** Model for requests that name none, when the fleet serves several. */
  default_model: string | null;
  min_ready: number;
  kind: BackendKind;
  health: {
    interval: number;
    starting_interval: number;
    timeout: number;
    rise: number;
    fall: number;
    stall_after: number;
    /** ms a ready backend holding requests may show no progress before it is ejected; 0 = off. */
    progress_timeout: number;
    /** ms a drained backend's requests may run before they are ended (and resumed or re-sent elsewhere); 0 = no deadline. */
    drain_deadline: number;
    /** ms an ejection by live traffic or the watchdog holds a backend out, times its ejections in a row; 0 = until `rise` probes pass. */
    ejection_time: number;
    /** Cap of that hold. */
    max_ejection_time: number;
    fatal_patterns: string[];
    /**
     * ms a start-up failure suspect (a traceback's final exception, or a runbook-grep line) may go
     * without start-up progress before the backend is `failed`; an exit or port loss fails it at once.
     * 0 = off (such a backend is `down` when its process is gone, as before).
     */
    failure_quiet: number;
  };
  routing: {
    policy: PolicyName;
    /** 0 = no cap; 'auto' = from the backend's reported capacity. */
    max_inflight_per_backend: number | 'auto';
    retries: number;
    /** Interval for scraping backend-reported load (`/metrics`); 0 disables. */
    load_interval: number;
    /** Replicas sharing a fixed `max_inflight_per_backend`: each takes 1/N of the room a load report shows. */
    replicas: number;
    /** `fleet`: with load reports a cap counts every replica's requests; `replica`: this replica's alone. */
    cap_scope: CapScope;
    /** `auto` cap: start a newly read backend low and double it at each report until it queues. */
    cap_slow_start: boolean;
    /** `prefix-aware` policy settings. */
    prefix: {
      /** Characters per hashed block of a prompt prefix. */
      block_chars: number;
      /** Memory bound: blocks remembered per backend. */
      max_blocks: number;
      /** ms after which a block not sent again is forgotten; 0 = only by capacity. */
      ttl: number;
      /** Share (0..1) of a request's blocks that must match for the cache to decide. */
      min_match: number;
      /** Load wins when the matched backend's load exceeds the least by more than this... */
      load_gap: number;
      /** ...and is more than this many times it. */
      load_ratio: number;
      /** Rendezvous hashing across replicas: a home over this x the mean load passes the request on; 0 = off. */
      balance_factor: number;
      /** Lower-case header whose value pins a conversation to a backend; null = none. */
      session_header: string | null;
      /** Waiters behind the queue's head a freed slot may go to when their prompt is cached there; 0 = off. */
      queue_lookahead: number;
      /** ms after which a queued request is no longer passed over for one cached on the free backend. */
      queue_hold: number;
    };
    /** The engines' KV-cache events (`kv-aware`; `auto` routes on them while they are live). */
    kv_events: {
      /** Subscribe at all; false = off (no sockets, `kv-aware` is `prefix-aware`, `auto` is `least-loaded`). */
      enabled: boolean;
      /** PUB endpoint template (`tcp://{host}:5557`); null = the one each backend's `/server_info` describes. */
      endpoint: string | null;
      /** Replay (ROUTER) endpoint template; null = none: a gap makes the backend's map stale. */
      replay_endpoint: string | null;
      /** Topic with `endpoint`; null = every topic. */
      topic: string | null;
      /** Tokens per block (the engines' page size) with `endpoint`. */
      block_size: number;
      /** Read each backend's `/server_info` `kv_events` when `endpoint` is null. */
      discover: boolean;
      /** Memory bound: (backend, block) entries held; the least recently stored go first. */
      max_blocks: number;
      /** ms a backend's map stays stale after a gap no replay filled. */
      stale_for: number;
      /** Request token ids remembered, per message, for the block keys (0 = no cache). */
      token_cache: number;
      /** ms a request waits for the tokenizer's worker; past it, it is routed without block keys (0 = never waits). */
      tokenize_wait: number;
      /** Tokenize every prompt whole; false = only as far as an engine could hold it (the rest keyed as held by none). */
      tokenize_whole: boolean;
    };
  };
  queue: {
    max_waiting: number;
    timeout: number;
    /** Priority classes, highest first. */
    classes: PriorityClassConfig[];
    /** Class of a request that names none and whose API key has none. */
    default_class: string;
    /** A lower-class request waiting longer than this is promoted; 0 = never. */
    max_starvation: number;
    /** Slots per capped backend that only the highest class may fill; 0 = none. */
    reserve: number;
  };
  /** Stream resume (docs/stream-resume.md). */
  retry: {
    /** Continuations of one cut stream at most; 0 = off. */
    resume_limit: number;
    /** ms a continuation may wait for a ready backend. */
    resume_wait: number;
  };
  upstream: {
    connect_timeout: number;
    /** Time to response headers; long, since a non-streamed generation sends nothing until done. */
    headers_timeout: number;
    /** Max gap between body chunks (also `stream_idle_timeout`). */
    stream_idle_timeout: number;
    /** Bearer token sent to backends started with `--api-key`. */
    api_key: string | null;
    /** Before `/readyz` first says ready: open connections to the ready backends and run one request through. */
    warm_up: boolean;
  };
  limits: {
    body_size: number;
    header_size: number;
    /** Client must send complete headers within this time (slowloris). */
    headers_timeout: number;
    /** Idle keep-alive connections are closed after this. */
    keep_alive_timeout: number;
    max_connections: number;
  };
  auth: {
    api_keys: string[];
  };
  /** Requests per client over a sliding window (@fastify/rate-limit); off by default. */
  rate_limit: {
    enabled: boolean;
    /** Requests allowed per key in each `window`. */
    max: number;
    window: number;
    /** What a client is: its API key (falling back to its address when it sends none), or its address. */
    by: RateLimitKey;
  };
  admin: {
    token: string | null;
  };
  discovery: DnsDiscoveryConfig | null;
  log: {
    level: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'silent';
    /** `stdout`, `stderr` or a file path. */
    destination: string;
    /** One line per proxied request. */
    access: boolean;
  };
  shutdown: {
    /** From SIGTERM to exit: `/readyz` 503 at once, in-flight requests (streams too) finish within it, then cut. */
    grace: number;
  };
  /** The OpenAI Batch API (`/v1/files`, `/v1/batches`): jobs run through fleetgate itself. */
  batch: {
    enabled: boolean;
    /** Uploaded files, job state and output files; relative to the working directory. */
    dir: string;
    /** Largest input file accepted, bytes. */
    max_file_size: number;
    /** A `postgres://` URL: files, jobs and outputs shared by every replica; null keeps them under `dir`. */
    database_url: string | null;
    /** A running job's lease in the database, ms: a job whose replica died is taken over after it. */
    lease: number;
    /** Send chat and completions lines streamed and assemble the answer: a dying engine's answers resume. */
    stream_upstream: boolean;
  };
  metrics: {
    /** The token-latency histograms (time to first token, inter-token, per output token, output tokens). */
    token_latency: boolean;
  };
  /** OpenTelemetry traces (docs/operations.md, "Traces"); off while `otlp_endpoint` is null. */
  tracing: TracingConfig;
  /** Engines `fleetgate launch` starts and supervises; under `serve` only their backends are used. */
  launch: LaunchConfig | null;
  /** The served model's tokenizer and chat template (token-exact stream resume). */
  model: ModelConfig;
}

export interface ModelConfig {
  /** A Hugging Face model directory (`auto` resolved: launch.command's local `--model-path`); null: none. */
  dir: string | null;
  /** Served model name → its directory, when several models are served. */
  dirs: Record<string, string>;
}

export type OtlpProtocol = 'http/protobuf' | 'http/json';
export const OTLP_PROTOCOLS: readonly OtlpProtocol[] = ['http/protobuf', 'http/json'];

export interface TracingConfig {
  /** OTLP/HTTP collector: its base URL (`/v1/traces` is added) or the full traces URL; null = no tracing. */
  otlp_endpoint: string | null;
  otlp_protocol: OtlpProtocol;
  /** Share (0..1) of traces started here that are sampled; a request with a `traceparent` follows its flag. */
  sample_ratio: number;
  /** `service.name` of fleetgate's spans. */
  service_name: string;
}

/** One engine of `launch`, every placeholder filled in. */
export interface LaunchEngine {
  /** The backend's name. */
  name: string;
  port: number;
  /** Program and arguments, never run through a shell. */
  argv: string[];
  /** Extra environment, `CUDA_VISIBLE_DEVICES` included. */
  env: Record<string, string>;
  /** stdout and stderr are appended here; also the backend's watched log. */
  log: string;
  /** `CUDA_VISIBLE_DEVICES` of this engine, e.g. `2,3`. */
  gpus: string;
}

/** A remedy's change to one flag: a new value, or a numeric step bounded by `min`/`max`. */
export type RemedyChange = { value: string } | { step: number; min: number | null; max: number | null };

export interface LaunchRemedy {
  /** Regular expression on the failure reason. */
  when: string;
  /** Flag (e.g. `--mem-fraction-static`) to its change. */
  set: Record<string, RemedyChange>;
}

export type LaunchOnExit = 'stop' | 'keep';
export const LAUNCH_ON_EXIT: readonly LaunchOnExit[] = ['stop', 'keep'];

export interface LaunchConfig {
  engines: LaunchEngine[];
  stop_grace: number;
  stable_after: number;
  restart_backoff: number;
  restart_backoff_max: number;
  /** Restarts in a row before the engine is left `failed`; 0 = never restart. */
  max_restarts: number;
  on_exit: LaunchOnExit;
  remedies: LaunchRemedy[];
}
