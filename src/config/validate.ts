/**
 * Turns a raw config object (parsed YAML, with env and flag settings merged in) into a `Config`: every key
 * checked against one schema, unknown keys refused, defaults filled in, the `fleet` shorthand expanded.
 */

import { parse as parseYaml } from 'yaml';
import * as defaults from './defaults.js';
import { parseDuration, parseSize } from './duration.js';
import { ConfigError, describeValue, unknownKeyProblem } from './errors.js';
import {
  BACKEND_KINDS,
  type BackendConfig,
  type BackendKind,
  type Config,
  type HostPort,
  POLICY_NAMES,
} from './types.js';

export const LOG_LEVELS: readonly Config['log']['level'][] = [
  'trace',
  'debug',
  'info',
  'warn',
  'error',
  'fatal',
  'silent',
];

/** How to read one key: its default, its check and conversion, and how a string from env or a flag maps onto it. */
interface Rule<T> {
  /** Value when the key is absent; a rule without one makes its key required. */
  readonly fallback?: () => T;
  /** Turns a string from the environment or a flag into what `parse` expects (`"3"` into 3 for integers). */
  readonly fromText: (text: string) => unknown;
  /** The keys of a section, for did-you-mean and for `--set` lookups. */
  readonly fields?: Readonly<Record<string, Rule<unknown>>>;
  parse(value: unknown, key: string): T;
}

function fail(key: string, problem: string): never {
  throw new ConfigError(key, problem);
}

function childKey(parent: string, child: string): string {
  return parent === '' ? child : `${parent}.${child}`;
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const keepText = (text: string): unknown => text;
const textToInteger = (text: string): unknown => (/^[+-]?\d+$/.test(text.trim()) ? Number(text) : text);
const textToBoolean = (text: string): unknown => {
  const word = text.trim().toLowerCase();
  return word === 'true' ? true : word === 'false' ? false : text;
};
/** Lists and sections from a flag are written in YAML flow style: `--set 'auth.api_keys=[k1, k2]'`. */
const textToStructure = (text: string): unknown => {
  try {
    return parseYaml(text);
  } catch {
    return text;
  }
};

// ---- scalar rules ----

function integer(options: { min: number; max?: number; fallback?: number }): Rule<number> {
  const { min, max, fallback } = options;
  const expected = max === undefined ? `an integer >= ${min}` : `an integer from ${min} to ${max}`;
  return {
    fallback: fallback === undefined ? undefined : () => fallback,
    fromText: textToInteger,
    parse(value, key) {
      const valid =
        Number.isSafeInteger(value) && (value as number) >= min && (max === undefined || (value as number) <= max);
      return valid ? (value as number) : fail(key, `expected ${expected}, got ${describeValue(value)}`);
    },
  };
}

function duration(fallback: number | undefined, { mayBeZero = true } = {}): Rule<number> {
  return {
    fallback: fallback === undefined ? undefined : () => fallback,
    fromText: keepText,
    parse(value, key) {
      if (typeof value === 'number' && value !== 0) fail(key, `${value} has no unit (e.g. 500ms, 10s)`);
      const ms = parseDuration(value);
      if (ms === null) fail(key, `${describeValue(value)} is not a duration (e.g. 500ms, 10s)`);
      if (ms === 0 && !mayBeZero) fail(key, 'must be more than 0');
      return ms;
    },
  };
}

function size(fallback: number): Rule<number> {
  return {
    fallback: () => fallback,
    fromText: keepText,
    parse(value, key) {
      const bytes = parseSize(value);
      if (bytes === null) fail(key, `${describeValue(value)} is not a size (e.g. 512KiB, 32MiB)`);
      if (bytes === 0) fail(key, 'must be more than 0');
      return bytes;
    },
  };
}

function oneOf<T extends string>(values: readonly T[], fallback?: T): Rule<T> {
  return {
    fallback: fallback === undefined ? undefined : () => fallback,
    fromText: keepText,
    parse(value, key) {
      return values.includes(value as T)
        ? (value as T)
        : fail(key, `${describeValue(value)} is not one of ${values.join(', ')}`);
    },
  };
}

function text(fallback?: string, check?: (value: string, key: string) => void): Rule<string> {
  return {
    fallback: fallback === undefined ? undefined : () => fallback,
    fromText: keepText,
    parse(value, key) {
      if (typeof value !== 'string') {
        const hint = typeof value === 'number' || typeof value === 'boolean' ? ' (quote it in YAML)' : '';
        fail(key, `expected a string, got ${describeValue(value)}${hint}`);
      }
      if (value.trim() === '') fail(key, 'must not be empty');
      check?.(value, key);
      return value;
    },
  };
}

function boolean(fallback: boolean): Rule<boolean> {
  return {
    fallback: () => fallback,
    fromText: textToBoolean,
    parse(value, key) {
      return typeof value === 'boolean' ? value : fail(key, `expected true or false, got ${describeValue(value)}`);
    },
  };
}

function regexSource(): Rule<string> {
  return text(undefined, (source, key) => {
    try {
      new RegExp(source);
    } catch (error) {
      const reason = (error as Error).message.split(': ').at(-1);
      fail(key, `${describeValue(source)} is not a valid regular expression (${reason})`);
    }
  });
}

// ---- combinators ----

/** `null` (or, from env and flags, `null` or an empty string) is accepted and is the default. */
function nullable<T>(rule: Rule<T>): Rule<T | null> {
  return {
    fallback: () => null,
    fromText: (text) => (text === '' || text === 'null' ? null : rule.fromText(text)),
    fields: rule.fields,
    parse: (value, key) => (value === null ? null : rule.parse(value, key)),
  };
}

/** `null` counts as an empty list, so `fatal_patterns:` alone means none. */
function list<T>(item: Rule<T>): Rule<T[]> {
  return {
    fallback: () => [],
    fromText: textToStructure,
    parse(value, key) {
      if (value === null) return [];
      if (!Array.isArray(value)) fail(key, `expected a list, got ${describeValue(value)}`);
      return value.map((element, index) => item.parse(element, `${key}[${index}]`));
    },
  };
}

/** A mapping with exactly these keys; `null` counts as an empty mapping, so `health:` alone means defaults. */
function section<T extends object>(fields: { [K in keyof T]: Rule<T[K]> }): Rule<T> {
  const rules: Readonly<Record<string, Rule<unknown>>> = fields;
  const names = Object.keys(rules);
  const parse = (value: unknown, key: string): T => {
    const mapping = value ?? {};
    if (!isMapping(mapping))
      fail(key, `expected a mapping of ${key === '' ? 'settings' : names.join(', ')}, got ${describeValue(value)}`);
    for (const name of Object.keys(mapping)) {
      if (!Object.hasOwn(rules, name)) fail(childKey(key, name), unknownKeyProblemIn(name, rules));
    }
    const result: Record<string, unknown> = {};
    for (const [name, rule] of Object.entries(rules)) {
      const subKey = childKey(key, name);
      const given = mapping[name];
      if (given !== undefined) result[name] = rule.parse(given, subKey);
      else if (rule.fallback !== undefined) result[name] = rule.fallback();
      else fail(subKey, 'is required');
    }
    return result as T;
  };
  const allOptional = Object.values(rules).every((rule) => rule.fallback !== undefined);
  return { fallback: allOptional ? () => parse({}, '') : undefined, fromText: textToStructure, fields: rules, parse };
}

/** Did-you-mean among the section's keys, or a key of the same name one level down (`interval` → `health.interval`). */
function unknownKeyProblemIn(name: string, rules: Readonly<Record<string, Rule<unknown>>>): string {
  for (const [sectionName, rule] of Object.entries(rules)) {
    if (rule.fields !== undefined && Object.hasOwn(rule.fields, name)) {
      return `unknown key (did you mean "${sectionName}.${name}"?)`;
    }
  }
  return unknownKeyProblem(name, Object.keys(rules));
}

// ---- addresses ----

/** `host:port`, `[::1]:8080` or `:8080` (all interfaces); null if `text` is none of these. */
export function parseHostPort(text: string): HostPort | null {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^\s:/[\]]*)):(\d{1,5})$/.exec(text.trim());
  if (match === null || Number(match[3]) > 65535) return null;
  const host = match[1] ?? (match[2] === '' ? defaults.DEFAULT_LISTEN_HOST : match[2]);
  return { host, port: Number(match[3]) };
}

function hostPort(fallback?: HostPort): Rule<HostPort> {
  return {
    fallback: fallback === undefined ? undefined : () => ({ ...fallback }),
    fromText: keepText,
    parse(value, key) {
      const parsed = typeof value === 'string' ? parseHostPort(value) : null;
      if (parsed !== null) return parsed;
      const hint =
        Array.isArray(value) || (typeof value === 'string' && value.includes('::'))
          ? '; write IPv6 as "[::1]:8080", quoted'
          : '';
      return fail(key, `${describeValue(value)} is not host:port (e.g. 0.0.0.0:8080${hint})`);
    },
  };
}

interface BackendAddress {
  /** `http://127.0.0.1:30000`: scheme, host and port only, the port always written out. */
  origin: string;
  /** `127.0.0.1:30000`, the default name. */
  hostPort: string;
}

const URL_EXAMPLE = '(e.g. http://127.0.0.1:30000)';

function parseBackendUrl(value: unknown, key: string): BackendAddress {
  if (typeof value !== 'string') return fail(key, `expected a URL ${URL_EXAMPLE}, got ${describeValue(value)}`);
  const quoted = describeValue(value);
  let url: URL;
  try {
    url = new URL(value.trim());
  } catch {
    return fail(key, `${quoted} is not an http(s) URL ${URL_EXAMPLE}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    fail(key, `${quoted} is not an http(s) URL ${URL_EXAMPLE}`);
  if (url.hostname === '') fail(key, `${quoted} has no host ${URL_EXAMPLE}`);
  if (url.username !== '' || url.password !== '')
    fail(key, `${quoted} must not contain credentials (set upstream.api_key)`);
  // URL drops a port equal to the scheme's default (http://host:80), so look at what was written.
  const port = url.port || /^[a-z]+:\/\/[^/?#]*:(\d+)(?:[/?#]|$)/i.exec(value.trim())?.[1];
  if (!port) fail(key, `${quoted} has no port ${URL_EXAMPLE}`);
  return { origin: `${url.protocol}//${url.hostname}:${port}`, hostPort: `${url.hostname}:${port}` };
}

// ---- backends and the fleet shorthand ----

/** A backend as written, before names and kinds are resolved. */
interface StaticBackend {
  url: string;
  defaultName: string;
  name: string | null;
  kind: BackendKind | null;
  log: string | null;
  /** Key paths to report a duplicate URL or name at. */
  urlKey: string;
  nameKey: string;
}

const backendName = text(undefined, (name, key) => {
  if (/[\s/]/.test(name)) fail(key, `${describeValue(name)} must not contain "/" or whitespace`);
});
const kindOrInherit = nullable(oneOf(BACKEND_KINDS));

const backendMapping = section({
  url: { fromText: keepText, parse: parseBackendUrl },
  name: nullable(backendName),
  kind: kindOrInherit,
  log: nullable(text()),
});

const backendEntry: Rule<StaticBackend> = {
  fromText: keepText,
  fields: backendMapping.fields,
  parse(value, key) {
    if (typeof value === 'string') {
      const address = parseBackendUrl(value, key);
      return {
        url: address.origin,
        defaultName: address.hostPort,
        name: null,
        kind: null,
        log: null,
        urlKey: key,
        nameKey: key,
      };
    }
    if (!isMapping(value))
      fail(key, `expected a URL or a mapping of url, name, kind, log, got ${describeValue(value)}`);
    const { url, ...rest } = backendMapping.parse(value, key);
    return {
      url: url.origin,
      defaultName: url.hostPort,
      ...rest,
      urlKey: `${key}.url`,
      nameKey: value.name === undefined ? key : `${key}.name`,
    };
  },
};

/** One backend from a URL or `{url, name?, kind?, log?}`, e.g. the body of `POST /fleet/backends`. */
export function validateBackend(raw: unknown, defaultKind: BackendKind, key = 'backend'): BackendConfig {
  const entry = backendEntry.parse(raw, key);
  return { url: entry.url, name: entry.name ?? entry.defaultName, kind: entry.kind ?? defaultKind, log: entry.log };
}

function checkPort(value: unknown, key: string): number {
  return Number.isInteger(value) && (value as number) >= 1 && (value as number) <= 65535
    ? (value as number)
    : fail(key, `${describeValue(value)} is not a port (1-65535)`);
}

/** `30000`, `"30000-30006"` or a list of either. */
function parsePorts(value: unknown, key: string): number[] {
  if (Array.isArray(value)) return value.flatMap((item, index) => parsePorts(item, `${key}[${index}]`));
  if (typeof value === 'number') return [checkPort(value, key)];
  const range = typeof value === 'string' ? /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(value) : null;
  if (range === null)
    return fail(key, `expected a port, a range like 30000-30006 or a list of ports, got ${describeValue(value)}`);
  const first = checkPort(Number(range[1]), key);
  const last = range[2] === undefined ? first : checkPort(Number(range[2]), key);
  if (last < first) fail(key, `range ${first}-${last} is reversed`);
  return Array.from({ length: last - first + 1 }, (_, offset) => first + offset);
}

/** Names and log paths of a fleet: `{i}` is the index 0..n-1, `{port}` the port. */
function template(fallback?: string): Rule<string> {
  return text(fallback, (pattern, key) => {
    for (const [, placeholder] of pattern.matchAll(/\{([^}]*)\}/g)) {
      if (placeholder !== 'i' && placeholder !== 'port')
        fail(key, `unknown placeholder {${placeholder}} (use {i} or {port})`);
    }
  });
}

const fleetMapping = section({
  host: text(defaults.DEFAULT_FLEET_HOST),
  ports: { fromText: textToStructure, parse: parsePorts } satisfies Rule<number[]>,
  name: template(defaults.DEFAULT_FLEET_NAME),
  log: nullable(template()),
  kind: kindOrInherit,
});

function expandFleet(fleet: ReturnType<typeof fleetMapping.parse>, key: string): StaticBackend[] {
  const { ports, name } = fleet;
  const varies = (pattern: string) => pattern.includes('{i}') || pattern.includes('{port}');
  if (ports.length > 1 && !varies(name))
    fail(`${key}.name`, `${describeValue(name)} needs {i} or {port} to tell ${ports.length} backends apart`);
  if (ports.length > 1 && fleet.log !== null && !varies(fleet.log))
    fail(
      `${key}.log`,
      `${describeValue(fleet.log)} needs {i} or {port}: ${ports.length} backends cannot share one log`,
    );
  const host = fleet.host.includes(':') && !fleet.host.startsWith('[') ? `[${fleet.host}]` : fleet.host;
  return ports.map((port, i) => {
    const fill = (pattern: string) => pattern.replaceAll('{i}', String(i)).replaceAll('{port}', String(port));
    const address = parseBackendUrl(`http://${host}:${port}`, `${key}.host`);
    return {
      url: address.origin,
      defaultName: address.hostPort,
      name: fill(name),
      kind: fleet.kind,
      log: fleet.log === null ? null : fill(fleet.log),
      urlKey: `${key}.ports`,
      nameKey: `${key}.name`,
    };
  });
}

/** `fleet:` is one mapping, or a list of them for several hosts. */
const fleetRule: Rule<StaticBackend[]> = {
  fallback: () => [],
  fromText: textToStructure,
  fields: fleetMapping.fields,
  parse(value, key) {
    if (value === null) return [];
    const fleets = Array.isArray(value)
      ? value.map((fleet, index) => [fleet, `${key}[${index}]`] as const)
      : [[value, key] as const];
    return fleets.flatMap(([fleet, fleetKey]) => expandFleet(fleetMapping.parse(fleet, fleetKey), fleetKey));
  },
};

function resolveBackends(entries: readonly StaticBackend[], defaultKind: BackendKind): BackendConfig[] {
  const seenUrls = new Set<string>();
  const seenNames = new Set<string>();
  return entries.map((entry) => {
    if (seenUrls.has(entry.url)) fail(entry.urlKey, `duplicate url ${describeValue(entry.url)}`);
    const name = entry.name ?? entry.defaultName;
    if (seenNames.has(name)) fail(entry.nameKey, `duplicate name ${describeValue(name)}`);
    seenUrls.add(entry.url);
    seenNames.add(name);
    return { url: entry.url, name, kind: entry.kind ?? defaultKind, log: entry.log };
  });
}

// ---- the whole file ----

const maxInflight: Rule<number | 'auto'> = {
  fallback: () => defaults.DEFAULT_MAX_INFLIGHT_PER_BACKEND,
  fromText: (text) => (text.trim() === 'auto' ? 'auto' : textToInteger(text)),
  parse(value, key) {
    if (value === 'auto' || (Number.isSafeInteger(value) && (value as number) >= 0)) return value as number | 'auto';
    return fail(key, `expected an integer >= 0 or "auto", got ${describeValue(value)}`);
  },
};

const topLevel = section({
  listen: hostPort(defaults.DEFAULT_LISTEN),
  metrics_listen: nullable(hostPort()),
  backends: list(backendEntry),
  fleet: fleetRule,
  expect_model: nullable(text()),
  min_ready: integer({ min: 0, fallback: defaults.DEFAULT_MIN_READY }),
  kind: oneOf(BACKEND_KINDS, defaults.DEFAULT_KIND),
  health: section({
    interval: duration(defaults.DEFAULT_HEALTH_INTERVAL, { mayBeZero: false }),
    starting_interval: duration(defaults.DEFAULT_HEALTH_STARTING_INTERVAL, { mayBeZero: false }),
    timeout: duration(defaults.DEFAULT_HEALTH_TIMEOUT, { mayBeZero: false }),
    rise: integer({ min: 1, fallback: defaults.DEFAULT_HEALTH_RISE }),
    fall: integer({ min: 1, fallback: defaults.DEFAULT_HEALTH_FALL }),
    stall_after: duration(defaults.DEFAULT_HEALTH_STALL_AFTER, { mayBeZero: false }),
    fatal_patterns: list(regexSource()),
  }),
  routing: section({
    policy: oneOf(POLICY_NAMES, defaults.DEFAULT_ROUTING_POLICY),
    max_inflight_per_backend: maxInflight,
    retries: integer({ min: 0, fallback: defaults.DEFAULT_ROUTING_RETRIES }),
    load_interval: duration(defaults.DEFAULT_LOAD_INTERVAL),
  }),
  queue: section({
    max_waiting: integer({ min: 0, fallback: defaults.DEFAULT_QUEUE_MAX_WAITING }),
    timeout: duration(defaults.DEFAULT_QUEUE_TIMEOUT),
  }),
  upstream: section({
    connect_timeout: duration(defaults.DEFAULT_UPSTREAM_CONNECT_TIMEOUT, { mayBeZero: false }),
    headers_timeout: duration(defaults.DEFAULT_UPSTREAM_HEADERS_TIMEOUT),
    stream_idle_timeout: duration(defaults.DEFAULT_UPSTREAM_STREAM_IDLE_TIMEOUT),
    api_key: nullable(text()),
  }),
  limits: section({
    body_size: size(defaults.DEFAULT_BODY_SIZE),
    header_size: size(defaults.DEFAULT_HEADER_SIZE),
    headers_timeout: duration(defaults.DEFAULT_CLIENT_HEADERS_TIMEOUT, { mayBeZero: false }),
    keep_alive_timeout: duration(defaults.DEFAULT_KEEP_ALIVE_TIMEOUT),
    max_connections: integer({ min: 0, fallback: defaults.DEFAULT_MAX_CONNECTIONS }),
  }),
  auth: section({ api_keys: list(text()) }),
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
  shutdown: section({ drain_timeout: duration(defaults.DEFAULT_DRAIN_TIMEOUT) }),
});

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
  const { fleet, backends: listed, ...top } = topLevel.parse(raw, '');
  // The fleet comes first: `backends` then adds machines beside the DP fleet.
  const backends = resolveBackends([...fleet, ...listed], top.kind);
  const discovery = top.discovery === null ? null : { ...top.discovery, kind: top.discovery.kind ?? top.kind };
  if (backends.length === 0 && discovery === null)
    fail('backends', 'no backends configured (set backends, fleet or discovery)');
  if (discovery === null && top.min_ready > backends.length) {
    fail('min_ready', `${top.min_ready} is more than the ${backends.length} configured backends`);
  }
  const { metrics_listen: metrics, listen } = top;
  if (metrics !== null && metrics.port !== 0 && metrics.port === listen.port && metrics.host === listen.host) {
    fail('metrics_listen', `${metrics.host}:${metrics.port} is also the main listen address`);
  }
  return { ...top, backends, discovery };
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
