/** The validated, fully-defaulted configuration. Durations are milliseconds, sizes bytes. */

export type BackendKind = 'sglang' | 'vllm' | 'openai';
export const BACKEND_KINDS: readonly BackendKind[] = ['sglang', 'vllm', 'openai'];

export type PolicyName = 'least-loaded' | 'round-robin' | 'power-of-two';
export const POLICY_NAMES: readonly PolicyName[] = ['least-loaded', 'round-robin', 'power-of-two'];

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
  min_ready: number;
  kind: BackendKind;
  health: {
    interval: number;
    starting_interval: number;
    timeout: number;
    rise: number;
    fall: number;
    stall_after: number;
    fatal_patterns: string[];
  };
  routing: {
    policy: PolicyName;
    /** 0 = no cap; 'auto' = from the backend's reported capacity. */
    max_inflight_per_backend: number | 'auto';
    retries: number;
    /** Interval for scraping backend-reported load (`/metrics`); 0 disables. */
    load_interval: number;
  };
  queue: {
    max_waiting: number;
    timeout: number;
  };
  upstream: {
    connect_timeout: number;
    /** Time to response headers; long, since a non-streamed generation sends nothing until done. */
    headers_timeout: number;
    /** Max gap between body chunks (also `stream_idle_timeout`). */
    stream_idle_timeout: number;
    /** Bearer token sent to backends started with `--api-key`. */
    api_key: string | null;
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
    drain_timeout: number;
  };
}
