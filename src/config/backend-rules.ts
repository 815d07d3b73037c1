/** Schema rules for backends: URLs, names, kinds, log paths, and the `fleet` shorthand. */
import * as defaults from './defaults.js';
import { describeValue } from './errors.js';
import { isObject } from './json-object.js';
import {
  fail,
  keepText,
  nullable,
  oneOf,
  parseBackendUrl,
  type Rule,
  section,
  text,
  textToStructure,
} from './rules.js';
import { BACKEND_KINDS, type BackendConfig, type BackendKind } from './types.js';

// ---- backends and the fleet shorthand ----

/** A backend as written, before names and kinds are resolved. */
export interface StaticBackend {
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
export const kindOrInherit = nullable(oneOf(BACKEND_KINDS));

const backendMapping = section({
  url: { fromText: keepText, parse: parseBackendUrl },
  name: nullable(backendName),
  kind: kindOrInherit,
  log: nullable(text()),
});

export const backendEntry: Rule<StaticBackend> = {
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
    if (!isObject(value)) fail(key, `expected a URL or a mapping of url, name, kind, log, got ${describeValue(value)}`);
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

export function checkPort(value: unknown, key: string): number {
  return Number.isInteger(value) && (value as number) >= 1 && (value as number) <= 65535
    ? (value as number)
    : fail(key, `${describeValue(value)} is not a port (1-65535)`);
}

/** `30000`, `"30000-30006"` or a list of either. */
export function parsePorts(value: unknown, key: string): number[] {
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
export const fleetRule: Rule<StaticBackend[]> = {
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

export function resolveBackends(entries: readonly StaticBackend[], defaultKind: BackendKind): BackendConfig[] {
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
