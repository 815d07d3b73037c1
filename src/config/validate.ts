/**
 * Turns a raw config object (parsed YAML, with env and flag settings merged in) into a `Config`: every key
 * checked against one schema, unknown keys refused, defaults filled in, the `fleet` shorthand expanded.
 */

import { backendEntry, fleetRule, kindOrInherit, resolveBackends } from './backend-rules.js';
import * as defaults from './defaults.js';
import { ConfigError, describeValue } from './errors.js';
import { launchRule } from './launch-rules.js';
import { modelRule, resolveModel } from './model-rules.js';
import { checkDefaultClass, priorityClasses } from './queue-rules.js';
import {
  boolean,
  duration,
  fail,
  hostPort,
  integer,
  list,
  mapOf,
  nullable,
  number,
  oneOf,
  type Rule,
  regexSource,
  section,
  size,
  text,
  textToInteger,
} from './rules.js';
import { BACKEND_KINDS, CAP_SCOPES, type Config, OTLP_PROTOCOLS, POLICY_NAMES, RATE_LIMIT_KEYS } from './types.js';

const LOG_LEVELS: readonly Config['log']['level'][] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

// ---- the whole file ----

function headerName(value: string, key: string): void {
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(value)) fail(key, `"${value}" is not an HTTP header name`);
}

/** A ZeroMQ TCP endpoint template: `tcp://{host}:5557` or `tcp://10.0.0.7:5557`. */
function zmqEndpoint(value: string, key: string): void {
  if (!/^tcp:\/\/[^\s:]+:\d+$/.test(value))
    throw new ConfigError(key, `must be tcp://HOST:PORT (HOST may be {host}), got ${describeValue(value)}`);
}

function postgresUrl(value: string, key: string): void {
  let url: URL | null = null;
  try {
    url = new URL(value);
  } catch {}
  if (url === null || (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') || url.hostname === '')
    fail(key, 'expected a postgres:// URL (e.g. postgres://fleetgate:secret@postgres:5432/fleetgate)');
}

const maxInflight: Rule<number | 'auto'> = {
  fallback: () => defaults.DEFAULT_MAX_INFLIGHT_PER_BACKEND,
  fromText: (text) => (text.trim() === 'auto' ? 'auto' : textToInteger(text)),
  parse(value, key) {
    if (value === 'auto' || (Number.isSafeInteger(value) && (value as number) >= 0)) return value as number | 'auto';
    return fail(key, `expected an integer >= 0 or "auto", got ${describeValue(value)}`);
  },
};

/** 0 (hashing off) or a factor of at least 1: under 1 the bound would refuse a backend at the mean load. */
const anyFactor = number({ min: 0, fallback: defaults.DEFAULT_PREFIX_BALANCE_FACTOR });
const balanceFactor: Rule<number> = {
  ...anyFactor,
  parse(value, key) {
    const factor = anyFactor.parse(value, key);
    if (factor > 0 && factor < 1) fail(key, `expected 0 (off) or a factor >= 1 such as 1.25, got ${factor}`);
    return factor;
  },
};

/** `shutdown.grace`; `drain_timeout` is its former name, still read when `grace` is not set. */
const shutdownFields = section({ grace: nullable(duration(undefined)), drain_timeout: nullable(duration(undefined)) });
const shutdownRule: Rule<Config['shutdown']> = {
  fallback: () => ({ grace: defaults.DEFAULT_SHUTDOWN_GRACE }),
  fromText: shutdownFields.fromText,
  // As documented: `grace` defaults to 25 s; the parse below needs to tell it unset from set.
  fields: { ...shutdownFields.fields, grace: duration(defaults.DEFAULT_SHUTDOWN_GRACE) },
  parse(value, key) {
    const { grace, drain_timeout: former } = shutdownFields.parse(value, key);
    return { grace: grace ?? former ?? defaults.DEFAULT_SHUTDOWN_GRACE };
  },
};

const topLevel = section({
  listen: hostPort(defaults.DEFAULT_LISTEN),
  metrics_listen: nullable(hostPort()),
  backends: list(backendEntry),
  fleet: fleetRule,
  expect_model: nullable(text()),
  models: mapOf(text()),
  default_model: nullable(text()),
  min_ready: integer({ min: 0, fallback: defaults.DEFAULT_MIN_READY }),
  kind: oneOf(BACKEND_KINDS, defaults.DEFAULT_KIND),
  health: section({
    interval: duration(defaults.DEFAULT_HEALTH_INTERVAL, { mayBeZero: false }),
    starting_interval: duration(defaults.DEFAULT_HEALTH_STARTING_INTERVAL, { mayBeZero: false }),
    timeout: duration(defaults.DEFAULT_HEALTH_TIMEOUT, { mayBeZero: false }),
    rise: integer({ min: 1, fallback: defaults.DEFAULT_HEALTH_RISE }),
    fall: integer({ min: 1, fallback: defaults.DEFAULT_HEALTH_FALL }),
    stall_after: duration(defaults.DEFAULT_HEALTH_STALL_AFTER, { mayBeZero: false }),
    progress_timeout: duration(defaults.DEFAULT_HEALTH_PROGRESS_TIMEOUT),
    drain_deadline: duration(defaults.DEFAULT_HEALTH_DRAIN_DEADLINE),
    ejection_time: duration(defaults.DEFAULT_HEALTH_EJECTION_TIME),
    max_ejection_time: duration(defaults.DEFAULT_HEALTH_MAX_EJECTION_TIME, { mayBeZero: false }),
    fatal_patterns: list(regexSource()),
    failure_quiet: duration(defaults.DEFAULT_HEALTH_FAILURE_QUIET),
  }),
  routing: section({
    policy: oneOf(POLICY_NAMES, defaults.DEFAULT_ROUTING_POLICY),
    max_inflight_per_backend: maxInflight,
    retries: integer({ min: 0, fallback: defaults.DEFAULT_ROUTING_RETRIES }),
    load_interval: duration(defaults.DEFAULT_LOAD_INTERVAL),
    cap_slow_start: boolean(defaults.DEFAULT_CAP_SLOW_START),
    replicas: integer({ min: 1, max: 1000, fallback: defaults.DEFAULT_ROUTING_REPLICAS }),
    cap_scope: oneOf(CAP_SCOPES, defaults.DEFAULT_CAP_SCOPE),
    prefix: section({
      block_chars: integer({ min: 16, max: 65_536, fallback: defaults.DEFAULT_PREFIX_BLOCK_CHARS }),
      max_blocks: integer({ min: 1, fallback: defaults.DEFAULT_PREFIX_MAX_BLOCKS }),
      ttl: duration(defaults.DEFAULT_PREFIX_TTL),
      min_match: number({ min: 0, max: 1, fallback: defaults.DEFAULT_PREFIX_MIN_MATCH }),
      load_gap: number({ min: 0, fallback: defaults.DEFAULT_PREFIX_LOAD_GAP }),
      load_ratio: number({ min: 1, fallback: defaults.DEFAULT_PREFIX_LOAD_RATIO }),
      balance_factor: balanceFactor,
      queue_lookahead: integer({ min: 0, max: 10_000, fallback: defaults.DEFAULT_PREFIX_QUEUE_LOOKAHEAD }),
      queue_hold: duration(defaults.DEFAULT_PREFIX_QUEUE_HOLD),
      // Null turns pinning off; absent, the default header pins only requests that carry it.
      session_header: {
        ...nullable(text(undefined, headerName)),
        fallback: () => defaults.DEFAULT_PREFIX_SESSION_HEADER,
      },
    }),
    kv_events: section({
      enabled: boolean(defaults.DEFAULT_KV_EVENTS_ENABLED),
      endpoint: nullable(text(undefined, zmqEndpoint)),
      replay_endpoint: nullable(text(undefined, zmqEndpoint)),
      topic: nullable(text()),
      block_size: integer({ min: 1, max: 65_536, fallback: defaults.DEFAULT_KV_EVENTS_BLOCK_SIZE }),
      discover: boolean(defaults.DEFAULT_KV_EVENTS_DISCOVER),
      max_blocks: integer({ min: 1, fallback: defaults.DEFAULT_KV_EVENTS_MAX_BLOCKS }),
      stale_for: duration(defaults.DEFAULT_KV_EVENTS_STALE_FOR),
      token_cache: integer({ min: 0, fallback: defaults.DEFAULT_KV_EVENTS_TOKEN_CACHE }),
      tokenize_wait: duration(defaults.DEFAULT_KV_EVENTS_TOKENIZE_WAIT),
      tokenize_whole: boolean(defaults.DEFAULT_KV_EVENTS_TOKENIZE_WHOLE),
    }),
  }),
  queue: section({
    max_waiting: integer({ min: 0, fallback: defaults.DEFAULT_QUEUE_MAX_WAITING }),
    timeout: duration(defaults.DEFAULT_QUEUE_TIMEOUT),
    classes: priorityClasses,
    default_class: text(defaults.DEFAULT_QUEUE_DEFAULT_CLASS),
    max_starvation: duration(defaults.DEFAULT_QUEUE_MAX_STARVATION),
    reserve: integer({ min: 0, fallback: defaults.DEFAULT_QUEUE_RESERVE }),
  }),
  retry: section({
    resume_limit: integer({ min: 0, fallback: defaults.DEFAULT_RESUME_LIMIT }),
    resume_wait: duration(defaults.DEFAULT_RESUME_WAIT, { mayBeZero: false }),
  }),
  upstream: section({
    connect_timeout: duration(defaults.DEFAULT_UPSTREAM_CONNECT_TIMEOUT, { mayBeZero: false }),
    headers_timeout: duration(defaults.DEFAULT_UPSTREAM_HEADERS_TIMEOUT),
    stream_idle_timeout: duration(defaults.DEFAULT_UPSTREAM_STREAM_IDLE_TIMEOUT),
    api_key: nullable(text()),
    warm_up: boolean(defaults.DEFAULT_UPSTREAM_WARM_UP),
  }),
  limits: section({
    body_size: size(defaults.DEFAULT_BODY_SIZE),
    header_size: size(defaults.DEFAULT_HEADER_SIZE),
    headers_timeout: duration(defaults.DEFAULT_CLIENT_HEADERS_TIMEOUT, { mayBeZero: false }),
    keep_alive_timeout: duration(defaults.DEFAULT_KEEP_ALIVE_TIMEOUT),
    max_connections: integer({ min: 0, fallback: defaults.DEFAULT_MAX_CONNECTIONS }),
  }),
  auth: section({ api_keys: list(text()) }),
  rate_limit: section({
    enabled: boolean(defaults.DEFAULT_RATE_LIMIT_ENABLED),
    max: integer({ min: 1, fallback: defaults.DEFAULT_RATE_LIMIT_MAX }),
    window: duration(defaults.DEFAULT_RATE_LIMIT_WINDOW, { mayBeZero: false }),
    by: oneOf(RATE_LIMIT_KEYS, defaults.DEFAULT_RATE_LIMIT_BY),
  }),
  admin: section({ token: nullable(text()) }),
  discovery: nullable(
    section({
      dns: text(),
      port: integer({ min: 1, max: 65535 }),
      interval: duration(defaults.DEFAULT_DISCOVERY_INTERVAL, { mayBeZero: false }),
      kind: kindOrInherit,
    }),
  ),
  log: section({
    level: oneOf(LOG_LEVELS, defaults.DEFAULT_LOG_LEVEL),
    destination: text(defaults.DEFAULT_LOG_DESTINATION),
    access: boolean(defaults.DEFAULT_LOG_ACCESS),
  }),
  shutdown: shutdownRule,
  batch: section({
    enabled: boolean(defaults.DEFAULT_BATCH_ENABLED),
    dir: text(defaults.DEFAULT_BATCH_DIR),
    max_file_size: size(defaults.DEFAULT_BATCH_MAX_FILE_SIZE),
    database_url: nullable(text(undefined, postgresUrl)),
    lease: duration(defaults.DEFAULT_BATCH_LEASE, { mayBeZero: false }),
    stream_upstream: boolean(defaults.DEFAULT_BATCH_STREAM_UPSTREAM),
  }),
  metrics: section({ token_latency: boolean(defaults.DEFAULT_METRICS_TOKEN_LATENCY) }),
  tracing: section({
    otlp_endpoint: nullable(text(undefined, httpUrl)),
    otlp_protocol: oneOf(OTLP_PROTOCOLS, defaults.DEFAULT_TRACING_PROTOCOL),
    sample_ratio: number({ min: 0, max: 1, fallback: defaults.DEFAULT_TRACING_SAMPLE_RATIO }),
    service_name: text(defaults.DEFAULT_TRACING_SERVICE_NAME),
  }),
  launch: launchRule,
  model: modelRule,
});

function httpUrl(value: string, key: string): void {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    fail(key, `${JSON.stringify(value)} is not a URL (e.g. http://127.0.0.1:4318)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    fail(key, `${JSON.stringify(value)} is not an http(s) URL`);
}

/**
 * Checks and converts `raw` (e.g. parsed YAML) into a complete `Config`; throws a `ConfigError` naming the
 * first bad key. `source` names where `raw` came from (a file path) for the error's `source`.
 */
export function validateConfig(raw: unknown, source: string): Config {
  try {
    return buildConfig(raw);
  } catch (error) {
    if (error instanceof ConfigError && error.source === null && source !== '') throw error.withSource(`in ${source}`);
    throw error;
  }
}

function buildConfig(raw: unknown): Config {
  const { fleet, backends: listed, launch, ...top } = topLevel.parse(raw, '');
  // Launched engines and the fleet come first: `backends` then adds machines beside the DP fleet.
  const backends = resolveBackends([...(launch?.backends ?? []), ...fleet, ...listed], top.kind);
  const discovery = top.discovery === null ? null : { ...top.discovery, kind: top.discovery.kind ?? top.kind };
  if (backends.length === 0 && discovery === null)
    fail('backends', 'no backends configured (set backends, fleet or discovery)');
  if (discovery === null && top.min_ready > backends.length) {
    fail('min_ready', `${top.min_ready} is more than the ${backends.length} configured backends`);
  }
  checkDefaultClass(top.queue.classes, top.queue.default_class);
  const { metrics_listen: metrics, listen } = top;
  if (metrics !== null && metrics.port !== 0 && metrics.port === listen.port && metrics.host === listen.host) {
    fail('metrics_listen', `${metrics.host}:${metrics.port} is also the main listen address`);
  }
  const launched = launch?.config ?? null;
  return { ...top, backends, discovery, launch: launched, model: resolveModel(top.model, launched) };
}

/**
 * What a string from the environment or a flag means for the key at `path` (`['health', 'rise']`): a number,
 * boolean, null, list or mapping where the schema wants one, else the string itself. Unknown keys stay
 * strings, for validation to reject by name.
 */
export function coerceSettingText(path: readonly string[], text: string): unknown {
  let rule: Rule<unknown> | undefined = topLevel;
  for (const name of path) {
    rule = rule?.fields !== undefined && Object.hasOwn(rule.fields, name) ? rule.fields[name] : undefined;
  }
  return rule === undefined ? text : rule.fromText(text);
}

export { validateBackend } from './backend-rules.js';

/** The schema of the whole file, for the configuration reference test to walk (docs/configuration.md). */
export const CONFIG_SCHEMA: Rule<unknown> = topLevel;
