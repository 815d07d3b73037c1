/** Default values of every config key (durations in ms, sizes in bytes). config/fleetgate.yaml shows the same. */

import type { BackendKind, CapScope, Config, HostPort, PolicyName, RateLimitKey } from './types.js';

export const DEFAULT_LISTEN: Readonly<HostPort> = { host: '0.0.0.0', port: 8080 };
/** Host for `listen: ":8080"`. */
export const DEFAULT_LISTEN_HOST = '0.0.0.0';
export const DEFAULT_MIN_READY = 1;
export const DEFAULT_KIND: BackendKind = 'sglang';

/** `fleet:` shorthand. */
export const DEFAULT_FLEET_HOST = '127.0.0.1';
export const DEFAULT_FLEET_NAME = 'gpu{i}';

export const DEFAULT_HEALTH_INTERVAL = 10_000;
export const DEFAULT_HEALTH_STARTING_INTERVAL = 1_000;
export const DEFAULT_HEALTH_TIMEOUT = 5_000;
export const DEFAULT_HEALTH_RISE = 1;
export const DEFAULT_HEALTH_FALL = 3;
/** A hang during CUDA graph capture prints nothing more; loading 54 GB from a slow disk still logs every shard. */
export const DEFAULT_HEALTH_STALL_AFTER = 10 * 60_000;
/** A crashed engine exits within seconds of its traceback; a healthy one logs progress again. */
export const DEFAULT_HEALTH_FAILURE_QUIET = 5_000;
export const DEFAULT_HEALTH_PROGRESS_TIMEOUT = 60_000;
/**
 * Long enough for most generations in flight to finish where they run (1,000 tokens at 30 tokens/s is
 * about 35 s); the ones still running after it are resumed elsewhere, so an operator gets the GPU back
 * within a minute.
 */
export const DEFAULT_HEALTH_DRAIN_DEADLINE = 60_000;
/** Envoy outlier detection's defaults (`base_ejection_time` 30 s, `max_ejection_time` 300 s). */
export const DEFAULT_HEALTH_EJECTION_TIME = 30_000;
export const DEFAULT_HEALTH_MAX_EJECTION_TIME = 5 * 60_000;

/** `auto`: least-loaded, or kv-aware over it while the engines' KV events are live (docs/routing.md). */
/**
 * least-loaded, not `auto`: kv-aware has not yet been shown better than prefix-aware here (bench:prefix,
 * docs/benchmarks.md) and tokenizes each request on the event loop, so it is opt-in.
 */
export const DEFAULT_ROUTING_POLICY: PolicyName = 'least-loaded';
/** `auto`: the adaptive cap (src/routing/load/adaptive-cap.ts); it finished bench:balance's job first. */
export const DEFAULT_MAX_INFLIGHT_PER_BACKEND: number | 'auto' = 'auto';
export const DEFAULT_ROUTING_RETRIES = 2;
export const DEFAULT_RESUME_LIMIT = 2;
export const DEFAULT_RESUME_WAIT = 10_000;
/** Short enough for the adaptive cap to follow a backend's KV cache as answers grow. */
export const DEFAULT_LOAD_INTERVAL = 250;
export const DEFAULT_CAP_SLOW_START = false;
/** One replica takes all the room a report shows; set it to the Deployment's replica count (docs/replicas.md). */
export const DEFAULT_ROUTING_REPLICAS = 1;
/** Caps count every replica's requests (from the load reports): N replicas hold a backend near one cap, not N. */
export const DEFAULT_CAP_SCOPE: CapScope = 'fleet';

/** prefix-aware (docs/decisions.md, "prefix-aware"): 128 characters are about 32 tokens, two SGLang pages of 16. */
export const DEFAULT_PREFIX_BLOCK_CHARS = 128;
/** 65,536 blocks of 128 characters: 8 MiB of prompt per backend, a few MiB of map entries. */
export const DEFAULT_PREFIX_MAX_BLOCKS = 65_536;
export const DEFAULT_PREFIX_TTL = 10 * 60_000;
/** Like SGLang Model Gateway's `cache_threshold`. */
export const DEFAULT_PREFIX_MIN_MATCH = 0.3;
export const DEFAULT_PREFIX_LOAD_GAP = 4;
export const DEFAULT_PREFIX_LOAD_RATIO = 1.5;
/** Rendezvous hashing's load bound (HAProxy's `hash-balance-factor` 125): a home takes up to 1.25x the mean load. */
export const DEFAULT_PREFIX_BALANCE_FACTOR = 1.25;
export const DEFAULT_PREFIX_SESSION_HEADER = 'x-session-id';
/** Waiters a freed slot may look past for one cached on it (docs/decisions.md, "Waiting for the cached backend"). */
export const DEFAULT_PREFIX_QUEUE_LOOKAHEAD = 32;
export const DEFAULT_PREFIX_QUEUE_HOLD = 2_000;

export const DEFAULT_QUEUE_MAX_WAITING = 10_000;
export const DEFAULT_QUEUE_TIMEOUT = 120_000;
/** Two classes, so that a client can ask for `interactive` with no configuration. */
export const DEFAULT_QUEUE_CLASSES: readonly string[] = ['interactive', 'batch'];
export const DEFAULT_QUEUE_DEFAULT_CLASS = 'batch';
/** Longer than a batch request's usual wait in a busy queue, so priority holds in a normal batch job. */
export const DEFAULT_QUEUE_MAX_STARVATION = 60_000;
export const DEFAULT_QUEUE_RESERVE = 0;

export const DEFAULT_UPSTREAM_CONNECT_TIMEOUT = 5_000;
/** Non-streamed (e.g. thinking-mode) generations send no header until they are done, minutes later. */
export const DEFAULT_UPSTREAM_HEADERS_TIMEOUT = 60 * 60_000;
export const DEFAULT_UPSTREAM_STREAM_IDLE_TIMEOUT = 10 * 60_000;
export const DEFAULT_UPSTREAM_WARM_UP = true;

export const DEFAULT_BODY_SIZE = 32 * 2 ** 20;
export const DEFAULT_HEADER_SIZE = 64 * 2 ** 10;
export const DEFAULT_CLIENT_HEADERS_TIMEOUT = 30_000;
/** Longer than the 60 s idle timeout of common load balancers in front, so they close first. */
export const DEFAULT_KEEP_ALIVE_TIMEOUT = 72_000;
/** 0 = unlimited. */
export const DEFAULT_MAX_CONNECTIONS = 0;

export const DEFAULT_DISCOVERY_INTERVAL = 10_000;

export const DEFAULT_LOG_LEVEL: Config['log']['level'] = 'info';
export const DEFAULT_LOG_DESTINATION = 'stdout';
export const DEFAULT_LOG_ACCESS = true;

/** Below Kubernetes' default terminationGracePeriodSeconds (30 s) less a preStop pause. */
export const DEFAULT_SHUTDOWN_GRACE = 25_000;
export const DEFAULT_BATCH_ENABLED = true;
export const DEFAULT_BATCH_DIR = 'fleetgate-batches';
/** OpenAI's own limit for a Batch input file. */
export const DEFAULT_BATCH_MAX_FILE_SIZE = 200 * 2 ** 20;
export const DEFAULT_METRICS_TOKEN_LATENCY = true;
export const DEFAULT_TRACING_PROTOCOL = 'http/protobuf';
export const DEFAULT_TRACING_SAMPLE_RATIO = 1;
export const DEFAULT_TRACING_SERVICE_NAME = 'fleetgate';
export const DEFAULT_BATCH_LEASE = 15_000;
/** Batch chat/completions requests go upstream streamed, so a dying engine's answers are resumed. */
export const DEFAULT_BATCH_STREAM_UPSTREAM = true;
export const DEFAULT_RATE_LIMIT_ENABLED = false;
export const DEFAULT_RATE_LIMIT_MAX = 60;
export const DEFAULT_RATE_LIMIT_WINDOW = 60_000;
export const DEFAULT_RATE_LIMIT_BY: RateLimitKey = 'api_key';

/** `launch:` */
export const DEFAULT_LAUNCH_NAME = 'gpu{i}';
export const DEFAULT_LAUNCH_LOG = 'logs/{name}.log';
/** GPUs per engine: engine i gets i*N .. i*N+N-1. */
export const DEFAULT_LAUNCH_GPUS = 1;
/** SGLang flushes and frees its scheduler and detokenizer children within seconds; a hung one never does. */
export const DEFAULT_LAUNCH_STOP_GRACE = 30_000;
export const DEFAULT_LAUNCH_STABLE_AFTER = 10 * 60_000;
export const DEFAULT_LAUNCH_RESTART_BACKOFF = 10_000;
export const DEFAULT_LAUNCH_RESTART_BACKOFF_MAX = 5 * 60_000;
export const DEFAULT_LAUNCH_MAX_RESTARTS = 10;
export const DEFAULT_LAUNCH_ON_EXIT = 'stop';

/**
 * The config used when no file is given and `config/fleetgate.yaml` does not exist (fleetgate run outside
 * its repository): DESIGN's default fleet of seven SGLang servers on 127.0.0.1:30000-30006, named gpu0..gpu6.
 * A test checks that it and the shipped config/fleetgate.yaml give the same result.
 */
export const EMBEDDED_CONFIG: Readonly<Record<string, unknown>> = {
  fleet: { host: DEFAULT_FLEET_HOST, ports: '30000-30006', name: DEFAULT_FLEET_NAME },
};

/** KV events (docs/routing.md, "kv-aware"): subscribe wherever an engine describes its publisher. */
export const DEFAULT_KV_EVENTS_ENABLED = true;
/** SGLang's and vLLM's usual page size. */
export const DEFAULT_KV_EVENTS_BLOCK_SIZE = 16;
export const DEFAULT_KV_EVENTS_DISCOVER = true;
/** 1M (backend, block) entries: 16M cached tokens at 16 a block, ~150 MB at most (docs/routing.md). */
export const DEFAULT_KV_EVENTS_MAX_BLOCKS = 1_000_000;
export const DEFAULT_KV_EVENTS_STALE_FOR = 30_000;
/** Messages whose token ids are remembered (a conversation's system prompt and turns repeat). */
export const DEFAULT_KV_EVENTS_TOKEN_CACHE = 10_000;
/**
 * A request waits this long for its token ids: a few ms in steady state (the new turn of a conversation), while a
 * burst of long unseen prompts (group sampling's first samples) would queue seconds of tokenizing behind it.
 */
export const DEFAULT_KV_EVENTS_TOKENIZE_WAIT = 50;
/**
 * Text past what no engine could hold is not tokenized: a batch job's unique prompts cost a fifth of the CPU
 * (bench/prefix/kv-cpu-run.ts --workload batch), and the keys it would give could match nothing.
 */
export const DEFAULT_KV_EVENTS_TOKENIZE_WHOLE = false;
