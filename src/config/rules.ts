/**
 * The building blocks of the config schema: one `Rule` per key (default, check, conversion, and how a
 * string from the environment or a flag maps onto it), and combinators for lists and sections.
 */
import { parse as parseYaml } from 'yaml';
import * as defaults from './defaults.js';
import { parseDuration, parseSize } from './duration.js';
import { ConfigError, describeValue, unknownKeyProblem } from './errors.js';
import { isObject } from './json-object.js';
import type { HostPort } from './types.js';

/** How to read one key: its default, its check and conversion, and how a string from env or a flag maps onto it. */
export interface Rule<T> {
  /** Value when the key is absent; a rule without one makes its key required. */
  readonly fallback?: () => T;
  /** Turns a string from the environment or a flag into what `parse` expects (`"3"` into 3 for integers). */
  readonly fromText: (text: string) => unknown;
  /** The keys of a section, for did-you-mean and for `--set` lookups. */
  readonly fields?: Readonly<Record<string, Rule<unknown>>>;
  parse(value: unknown, key: string): T;
}

export function fail(key: string, problem: string): never {
  throw new ConfigError(key, problem);
}

function childKey(parent: string, child: string): string {
  return parent === '' ? child : `${parent}.${child}`;
}

export const keepText = (text: string): unknown => text;
export const textToInteger = (text: string): unknown => (/^[+-]?\d+$/.test(text.trim()) ? Number(text) : text);
const textToBoolean = (text: string): unknown => {
  const word = text.trim().toLowerCase();
  return word === 'true' ? true : word === 'false' ? false : text;
};
/** Lists and sections from a flag are written in YAML flow style: `--set 'auth.api_keys=[k1, k2]'`. */
export const textToStructure = (text: string): unknown => {
  try {
    return parseYaml(text);
  } catch {
    return text;
  }
};

// ---- scalar rules ----

export function integer(options: { min: number; max?: number; fallback?: number }): Rule<number> {
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

export function number(options: { min: number; max?: number; fallback: number }): Rule<number> {
  const { min, max, fallback } = options;
  const expected = max === undefined ? `a number >= ${min}` : `a number from ${min} to ${max}`;
  return {
    fallback: () => fallback,
    fromText: (text) => (text.trim() !== '' && Number.isFinite(Number(text)) ? Number(text) : text),
    parse(value, key) {
      const valid =
        typeof value === 'number' && Number.isFinite(value) && value >= min && (max === undefined || value <= max);
      return valid ? value : fail(key, `expected ${expected}, got ${describeValue(value)}`);
    },
  };
}

export function duration(fallback: number | undefined, { mayBeZero = true } = {}): Rule<number> {
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

export function size(fallback: number): Rule<number> {
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

export function oneOf<T extends string>(values: readonly T[], fallback?: T): Rule<T> {
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

export function text(fallback?: string, check?: (value: string, key: string) => void): Rule<string> {
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

export function boolean(fallback: boolean): Rule<boolean> {
  return {
    fallback: () => fallback,
    fromText: textToBoolean,
    parse(value, key) {
      return typeof value === 'boolean' ? value : fail(key, `expected true or false, got ${describeValue(value)}`);
    },
  };
}

export function regexSource(): Rule<string> {
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
export function nullable<T>(rule: Rule<T>): Rule<T | null> {
  return {
    fallback: () => null,
    fromText: (text) => (text === '' || text === 'null' ? null : rule.fromText(text)),
    fields: rule.fields,
    parse: (value, key) => (value === null ? null : rule.parse(value, key)),
  };
}

/** `null` counts as an empty list, so `fatal_patterns:` alone means none. */
export function list<T>(item: Rule<T>): Rule<T[]> {
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

/** A mapping of free keys to values of one rule; `null` counts as an empty mapping. */
export function mapOf<T>(value: Rule<T>): Rule<Record<string, T>> {
  return {
    fallback: () => ({}),
    fromText: textToStructure,
    parse(input, key) {
      if (input === null) return {};
      if (!isObject(input)) fail(key, `expected a mapping, got ${describeValue(input)}`);
      return Object.fromEntries(Object.entries(input).map(([name, v]) => [name, value.parse(v, childKey(key, name))]));
    },
  };
}

/** A mapping with exactly these keys; `null` counts as an empty mapping, so `health:` alone means defaults. */
export function section<T extends object>(fields: { [K in keyof T]: Rule<T[K]> }): Rule<T> {
  const rules: Readonly<Record<string, Rule<unknown>>> = fields;
  const names = Object.keys(rules);
  const parse = (value: unknown, key: string): T => {
    const mapping = value ?? {};
    if (!isObject(mapping))
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
function parseHostPort(text: string): HostPort | null {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^\s:/[\]]*)):(\d{1,5})$/.exec(text.trim());
  if (match === null || Number(match[3]) > 65535) return null;
  const host = match[1] ?? (match[2] === '' ? defaults.DEFAULT_LISTEN_HOST : match[2]);
  return { host, port: Number(match[3]) };
}

export function hostPort(fallback?: HostPort): Rule<HostPort> {
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

export interface BackendAddress {
  /** `http://127.0.0.1:30000`: scheme, host and port only, the port always written out. */
  origin: string;
  /** `127.0.0.1:30000`, the default name. */
  hostPort: string;
}

const URL_EXAMPLE = '(e.g. http://127.0.0.1:30000)';

export function parseBackendUrl(value: unknown, key: string): BackendAddress {
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
