/**
 * Schema rules for `launch:`: the engines `fleetgate launch` starts, expanded to one `LaunchEngine` and one
 * backend per port, every template split and filled here so that a bad one is a config error (exit 2).
 */
import { checkPort, kindOrInherit, parsePorts, type StaticBackend } from './backend-rules.js';
import { fillPlaceholders, LAUNCH_PLACEHOLDERS, splitCommand, unknownPlaceholder } from './command-template.js';
import * as defaults from './defaults.js';
import { describeValue } from './errors.js';
import { isObject } from './json-object.js';
import {
  duration,
  fail,
  integer,
  list,
  oneOf,
  parseBackendUrl,
  type Rule,
  regexSource,
  section,
  text,
  textToStructure,
} from './rules.js';
import { LAUNCH_ON_EXIT, type LaunchConfig, type LaunchEngine, type LaunchOnExit, type RemedyChange } from './types.js';

function templateText(allowed: readonly string[], fallback?: string): Rule<string> {
  return text(fallback, (pattern, key) => {
    const unknown = unknownPlaceholder(pattern, allowed);
    if (unknown !== null)
      fail(key, `unknown placeholder {${unknown}} (use ${allowed.map((name) => `{${name}}`).join(', ')})`);
  });
}

/** `N` GPUs per engine, or one entry per engine: `"0,1"`, `3` or `[0, 1]`. */
type GpuSpec = number | string[];

const gpusRule: Rule<GpuSpec> = {
  fallback: () => defaults.DEFAULT_LAUNCH_GPUS,
  fromText: textToStructure,
  parse(value, key) {
    if (typeof value === 'number') return integer({ min: 1 }).parse(value, key);
    if (!Array.isArray(value))
      fail(
        key,
        `expected GPUs per engine (e.g. 2) or a list with one GPU group per engine, got ${describeValue(value)}`,
      );
    return value.map((group, index) => {
      const itemKey = `${key}[${index}]`;
      const ids = Array.isArray(group) ? group : typeof group === 'string' ? group.split(',') : [group];
      const words = ids.map((id) => String(id).trim());
      if (words.length === 0 || words.some((id) => !/^\d+$/.test(id)))
        fail(itemKey, `${describeValue(group)} is not a GPU id or a list of them (e.g. "0,1" or [0, 1])`);
      return words.join(',');
    });
  },
};

const envRule: Rule<Record<string, string>> = {
  fallback: () => ({}),
  fromText: textToStructure,
  parse(value, key) {
    if (value === null) return {};
    if (!isObject(value)) fail(key, `expected a mapping of variable names to values, got ${describeValue(value)}`);
    const env: Record<string, string> = {};
    for (const [name, given] of Object.entries(value)) {
      const itemKey = `${key}.${name}`;
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) fail(itemKey, 'is not an environment variable name');
      if (typeof given !== 'string' && typeof given !== 'number' && typeof given !== 'boolean')
        fail(itemKey, `expected a string, got ${describeValue(given)}`);
      const word = String(given);
      const unknown = unknownPlaceholder(word, LAUNCH_PLACEHOLDERS);
      if (unknown !== null) fail(itemKey, `unknown placeholder {${unknown}}`);
      env[name] = word;
    }
    return env;
  },
};

const remedyChange: Rule<RemedyChange> = {
  fromText: textToStructure,
  parse(value, key) {
    if (typeof value === 'string' || typeof value === 'number') return { value: String(value) };
    if (!isObject(value)) fail(key, `expected a value or {step, min?, max?}, got ${describeValue(value)}`);
    const stepRule = section({
      step: number(),
      min: { ...number(), fallback: () => null } as Rule<number | null>,
      max: { ...number(), fallback: () => null } as Rule<number | null>,
    });
    const change = stepRule.parse(value, key);
    if (change.step === 0) fail(`${key}.step`, 'must not be 0');
    return change;
  },
};

function number(): Rule<number> {
  return {
    fromText: (text) => Number(text),
    parse: (value, key) =>
      typeof value === 'number' && Number.isFinite(value)
        ? value
        : fail(key, `expected a number, got ${describeValue(value)}`),
  };
}

const remedyRule = section({
  when: regexSource(),
  set: {
    fromText: textToStructure,
    parse(value, key) {
      if (!isObject(value) || Object.keys(value).length === 0)
        fail(key, `expected a mapping of flags to a value or {step, min?, max?}, got ${describeValue(value)}`);
      const set: Record<string, RemedyChange> = {};
      for (const [flag, change] of Object.entries(value)) {
        if (!/^--?[A-Za-z0-9][\w.-]*$/.test(flag)) fail(`${key}.${flag}`, 'is not a flag (e.g. --mem-fraction-static)');
        set[flag] = remedyChange.parse(change, `${key}.${flag}`);
      }
      return set;
    },
  } satisfies Rule<Record<string, RemedyChange>>,
});

const launchMapping = section({
  command: templateText(LAUNCH_PLACEHOLDERS),
  host: text(defaults.DEFAULT_FLEET_HOST),
  ports: { fromText: textToStructure, parse: parsePorts } satisfies Rule<number[]>,
  name: templateText(['i', 'port'], defaults.DEFAULT_LAUNCH_NAME),
  gpus: gpusRule,
  env: envRule,
  log: templateText(['i', 'port', 'name', 'host', 'gpus'], defaults.DEFAULT_LAUNCH_LOG),
  kind: kindOrInherit,
  stop_grace: duration(defaults.DEFAULT_LAUNCH_STOP_GRACE),
  stable_after: duration(defaults.DEFAULT_LAUNCH_STABLE_AFTER),
  restart_backoff: duration(defaults.DEFAULT_LAUNCH_RESTART_BACKOFF),
  restart_backoff_max: duration(defaults.DEFAULT_LAUNCH_RESTART_BACKOFF_MAX),
  max_restarts: integer({ min: 0, fallback: defaults.DEFAULT_LAUNCH_MAX_RESTARTS }),
  on_exit: oneOf<LaunchOnExit>(LAUNCH_ON_EXIT, defaults.DEFAULT_LAUNCH_ON_EXIT),
  remedies: list(remedyRule),
});

export interface ParsedLaunch {
  config: LaunchConfig;
  backends: StaticBackend[];
}

export const launchRule: Rule<ParsedLaunch | null> = {
  fallback: () => null,
  fromText: textToStructure,
  fields: launchMapping.fields,
  parse(value, key) {
    if (value === null) return null;
    return expandLaunch(launchMapping.parse(value, key), key);
  },
};

function expandLaunch(raw: ReturnType<typeof launchMapping.parse>, key: string): ParsedLaunch {
  const { ports, gpus } = raw;
  const words = splitCommand(raw.command);
  if (typeof words === 'string') fail(`${key}.command`, words);
  if (words.length === 0) fail(`${key}.command`, 'must not be empty');
  if (words[0] === '') fail(`${key}.command`, 'names no program (its first word is empty)');
  if (Array.isArray(gpus) && gpus.length !== ports.length)
    fail(`${key}.gpus`, `has ${gpus.length} GPU groups for ${ports.length} ports: give one per engine`);
  if (ports.length > 1 && unknownPlaceholder(raw.name, []) === null)
    fail(`${key}.name`, `${describeValue(raw.name)} needs {i} or {port} to tell ${ports.length} engines apart`);
  const host = raw.host.includes(':') && !raw.host.startsWith('[') ? `[${raw.host}]` : raw.host;
  const engines: LaunchEngine[] = [];
  const backends: StaticBackend[] = ports.map((port, i) => {
    checkPort(port, `${key}.ports`);
    const groupSize = typeof gpus === 'number' ? gpus : 0;
    const gpuList = Array.isArray(gpus)
      ? gpus[i]
      : Array.from({ length: groupSize }, (_, g) => String(i * groupSize + g)).join(',');
    const named = { i: String(i), port: String(port), host: raw.host, gpus: gpuList };
    const name = fillPlaceholders(raw.name, named);
    const log = fillPlaceholders(raw.log, { ...named, name });
    const values = { ...named, name, log };
    const env = Object.fromEntries(Object.entries(raw.env).map(([k, v]) => [k, fillPlaceholders(v, values)]));
    engines.push({
      name,
      port,
      argv: words.map((word) => fillPlaceholders(word, values)),
      env: { CUDA_VISIBLE_DEVICES: gpuList, ...env },
      log,
      gpus: gpuList,
    });
    const address = parseBackendUrl(`http://${host}:${port}`, `${key}.host`);
    return {
      url: address.origin,
      defaultName: address.hostPort,
      name,
      kind: raw.kind,
      log,
      urlKey: `${key}.ports`,
      nameKey: `${key}.name`,
    };
  });
  const logs = new Set(engines.map((engine) => engine.log));
  if (logs.size < engines.length)
    fail(`${key}.log`, `${describeValue(raw.log)} gives two engines one log: use {i}, {port} or {name}`);
  for (const [index, remedy] of raw.remedies.entries()) {
    checkRemedyFlags(remedy.set, words, `${key}.remedies[${index}].set`);
  }
  if (raw.restart_backoff_max < raw.restart_backoff)
    fail(`${key}.restart_backoff_max`, 'is less than launch.restart_backoff');
  const { command: _c, host: _h, ports: _p, name: _n, gpus: _g, env: _e, log: _l, kind: _k, ...policy } = raw;
  return { config: { engines, ...policy }, backends };
}

/** A step changes a number the command already passes: `--flag 0.88` or `--flag=0.88`. */
function checkRemedyFlags(set: Record<string, RemedyChange>, words: readonly string[], key: string): void {
  for (const [flag, change] of Object.entries(set)) {
    if (!('step' in change)) continue;
    const index = words.findIndex((word) => word === flag || word.startsWith(`${flag}=`));
    const current =
      index < 0 ? undefined : words[index] === flag ? words[index + 1] : words[index].slice(flag.length + 1);
    if (current === undefined || !Number.isFinite(Number(current)))
      fail(`${key}.${flag}`, `a step needs launch.command to pass ${flag} with a number (e.g. ${flag} 0.88)`);
  }
}
