/**
 * Where the config comes from: the YAML file, then the environment, then command-line flags, each
 * overriding the one before. Errors name the key and where its bad value was written.
 */

import { readFileSync, statSync } from 'node:fs';
import { isAbsolute, relative, resolve } from 'node:path';
import { type Document, isMap, isNode, isScalar, isSeq, LineCounter, parseDocument } from 'yaml';
import { EMBEDDED_CONFIG } from './defaults.js';
import { ConfigError, describeValue, unknownKeyProblem } from './errors.js';
import type { Config } from './types.js';
import { coerceSettingText, validateConfig } from './validate.js';

/** Exit status of `fleetgate serve` (and any verb) for bad flags or config: nothing was started. */
export const configExitCode = 2;

export const DEFAULT_CONFIG_PATH = 'config/fleetgate.yaml';

/** One value from the environment or a flag, for the key path `key` (`health.interval`). */
interface Setting {
  key: string;
  /** A string to coerce per the schema, or the URL list of `--backend` / `FLEETGATE_BACKENDS`. */
  value: string | string[];
  /** For messages: `--set health.interval`, `FLEETGATE_LISTEN`. */
  origin: string;
}

export interface ServeArgs {
  /** `--config FILE`, as written. */
  configPath: string | null;
  /** In command-line order; a later one wins. */
  settings: Setting[];
  /** Positional arguments and everything after `--`. */
  rest: string[];
  /** `--help` or `-h` was given: print the usage, load nothing. */
  help: boolean;
}

export interface LoadOptions {
  argv?: readonly string[];
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** The file read when neither `--config` nor `FLEETGATE_CONFIG` names one; default `config/fleetgate.yaml`. */
  defaultPath?: string;
}

export interface LoadedConfig {
  config: Config;
  /** Absolute path of the file read, or null when the embedded default was used. */
  path: string | null;
  rest: string[];
}

const FLAGS: Readonly<Record<string, string>> = {
  '--config': 'FILE',
  '--listen': 'HOST:PORT',
  '--backend': 'URL',
  '--set': 'key.path=value',
  '--log-level': 'LEVEL',
};

/** `--backend a --backend b,c` replaces the file's backends (and its `fleet`) with a, b and c. */
export function parseServeArgs(argv: readonly string[]): ServeArgs {
  const args: ServeArgs = { configPath: null, settings: [], rest: [], help: false };
  const backendUrls: string[] = [];
  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index];
    if (arg === '--') {
      args.rest.push(...argv.slice(index + 1));
      break;
    }
    if (!arg.startsWith('-') || arg === '-') {
      args.rest.push(arg);
      continue;
    }
    if (arg === '--help' || arg === '-h') {
      args.help = true;
      continue;
    }
    const equals = arg.indexOf('=');
    const flag = arg.startsWith('--') && equals > 0 ? arg.slice(0, equals) : arg;
    if (!Object.hasOwn(FLAGS, flag))
      throw new ConfigError(flag, unknownKeyProblem(flag, [...Object.keys(FLAGS), '--help'], 'flag'));
    const inline = flag === arg ? undefined : arg.slice(equals + 1);
    const value = inline ?? argv[++index];
    if (value === undefined || (inline === undefined && value.startsWith('--'))) {
      throw new ConfigError(flag, `needs a value (${flag} ${FLAGS[flag]})`);
    }
    switch (flag) {
      case '--config':
        args.configPath = value;
        break;
      case '--listen':
        args.settings.push({ key: 'listen', value, origin: flag });
        break;
      case '--log-level':
        args.settings.push({ key: 'log.level', value, origin: flag });
        break;
      case '--backend':
        if (backendUrls.length === 0) args.settings.push({ key: 'backends', value: backendUrls, origin: flag });
        backendUrls.push(...splitList(value));
        break;
      case '--set':
        args.settings.push(parseAssignment(value));
        break;
    }
  }
  return args;
}

function parseAssignment(assignment: string): Setting {
  const equals = assignment.indexOf('=');
  const key = assignment.slice(0, equals).trim();
  if (equals <= 0 || !isKeyPath(key)) {
    throw new ConfigError(
      '--set',
      `${describeValue(assignment)} is not key.path=value (e.g. --set health.interval=2s)`,
    );
  }
  // The value stays out of the origin: it may be a token.
  return { key, value: assignment.slice(equals + 1), origin: `--set ${key}` };
}

function isKeyPath(key: string): boolean {
  return key.split('.').every((segment) => /^[A-Za-z0-9_-]+$/.test(segment));
}

function splitList(text: string): string[] {
  return text
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
}

const NAMED_ENV: Readonly<Record<string, string>> = {
  FLEETGATE_LISTEN: 'listen',
  FLEETGATE_BACKENDS: 'backends',
  FLEETGATE_ADMIN_TOKEN: 'admin.token',
  FLEETGATE_LOG_LEVEL: 'log.level',
};

/**
 * `FLEETGATE__HEALTH__INTERVAL=5s` sets `health.interval` (double underscore nests, names are lowercased);
 * the named variables above win over it. Empty named variables count as unset (`FLEETGATE_LISTEN=` in a
 * compose file). Other `FLEETGATE_*` variables belong to other verbs and are left alone.
 */
export function settingsFromEnv(env: NodeJS.ProcessEnv): Setting[] {
  const settings: Setting[] = [];
  for (const name of Object.keys(env).sort()) {
    const value = env[name];
    if (!name.startsWith('FLEETGATE__') || value === undefined) continue;
    const key = name.slice('FLEETGATE__'.length).split('__').join('.').toLowerCase();
    if (!isKeyPath(key)) throw new ConfigError(name, 'is not a key path (e.g. FLEETGATE__HEALTH__INTERVAL=5s)');
    settings.push({ key, value, origin: name });
  }
  for (const [name, key] of Object.entries(NAMED_ENV)) {
    const value = env[name];
    if (value === undefined || value.trim() === '') continue;
    settings.push({ key, value: key === 'backends' ? splitList(value) : value, origin: name });
  }
  return settings;
}

/** The raw config being layered, with the origin of every key that env or a flag set. */
class Layers {
  readonly origins = new Map<string, string>();

  constructor(readonly raw: Record<string, unknown>) {}

  apply(setting: Setting): void {
    const path = setting.key.split('.');
    let section = this.raw;
    for (const [depth, name] of path.slice(0, -1).entries()) {
      const next = section[name] ?? {};
      if (typeof next !== 'object' || Array.isArray(next)) {
        const at = path.slice(0, depth + 1).join('.');
        throw new ConfigError(
          at,
          `is ${describeValue(next)}, not a section, so ${setting.key} cannot be set`,
          `from ${setting.origin}`,
        );
      }
      section[name] = next;
      section = next as Record<string, unknown>;
    }
    section[path[path.length - 1]] = Array.isArray(setting.value)
      ? setting.value
      : coerceSettingText(path, setting.value);
    // New static backends replace the old ones, the `fleet` shorthand included.
    if (setting.key === 'backends') {
      delete this.raw.fleet;
      this.forget('fleet');
    }
    this.forget(setting.key);
    this.origins.set(setting.key, setting.origin);
  }

  /** Where the value at `key` (`backends[2].url`) came from, if env or a flag set it or a section above it. */
  originOf(key: string): string | null {
    let best: string | null = null;
    for (const prefix of this.origins.keys()) {
      if (covers(prefix, key) && (best === null || prefix.length > best.length)) best = prefix;
    }
    return best === null ? null : (this.origins.get(best) ?? null);
  }

  private forget(prefix: string): void {
    for (const key of [...this.origins.keys()]) if (covers(prefix, key)) this.origins.delete(key);
  }
}

function covers(prefix: string, key: string): boolean {
  return key === prefix || key.startsWith(`${prefix}.`) || key.startsWith(`${prefix}[`);
}

interface ConfigFile {
  path: string;
  /** As shown in messages: relative to cwd when inside it. */
  shown: string;
  doc: Document;
  lines: LineCounter;
}

function readConfigFile(path: string, cwd: string, chosenBy: string): ConfigFile {
  const rel = relative(cwd, path);
  const shown = rel !== '' && !rel.startsWith('..') && !isAbsolute(rel) ? rel : path;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const reasons: Record<string, string> = {
      ENOENT: 'no such file',
      EISDIR: 'is a directory',
      EACCES: 'permission denied',
    };
    const code = (error as NodeJS.ErrnoException).code ?? '';
    throw new ConfigError('', `cannot read ${shown}: ${reasons[code] ?? (error as Error).message}`, `from ${chosenBy}`);
  }
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines });
  const syntaxError = doc.errors[0];
  if (syntaxError !== undefined) {
    const message = syntaxError.message.split('\n')[0].replace(/ at line \d+, column \d+:?$/, '');
    const position = syntaxError.linePos?.[0];
    const where = position === undefined ? shown : `${shown}:${position.line}:${position.col}`;
    throw new ConfigError('', `invalid YAML: ${message}`, `in ${where}`);
  }
  return { path, shown, doc, lines };
}

/**
 * The file's settings as plain values. Some YAML fails only here, not while parsing: an alias to an
 * anchor that was never set (`listen: *x`) or one expanded too often (an alias bomb). Found by the
 * fuzz suite (test/integration/fuzz-config.test.ts); it used to escape as a stack trace.
 */
function contentOf(file: ConfigFile): unknown {
  try {
    return file.doc.toJS({ maxAliasCount: 1000 }) ?? {};
  } catch (error) {
    throw new ConfigError('', `invalid YAML: ${(error as Error).message}`, `in ${file.shown}`);
  }
}

/** 1-based line of the deepest part of `key` (`backends[3].name`) present in the file, or null. */
function lineOf(file: ConfigFile, key: string): number | null {
  let node: unknown = file.doc.contents;
  let offset: number | null = null;
  for (const part of key.match(/[^.[\]]+/g) ?? []) {
    if (isMap(node)) {
      const pair = node.items.find((item) => isScalar(item.key) && String(item.key.value) === part);
      if (pair === undefined) break;
      offset = isNode(pair.key) && pair.key.range ? pair.key.range[0] : offset;
      node = pair.value;
    } else if (isSeq(node) && /^\d+$/.test(part)) {
      const item: unknown = node.items[Number(part)];
      if (!isNode(item)) break;
      offset = item.range ? item.range[0] : offset;
      node = item;
    } else {
      break;
    }
  }
  return offset === null ? null : file.lines.linePos(offset).line;
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/**
 * The config for `fleetgate serve`: the file named by `--config`, else by `FLEETGATE_CONFIG`, else
 * `defaultPath` under `cwd` if it exists, else the embedded default (DESIGN's seven local SGLang servers);
 * then `FLEETGATE_*` variables; then flags. Throws `ConfigError` on the first problem.
 */
export function loadConfig(options: LoadOptions = {}): LoadedConfig {
  const { argv = [], env = process.env, cwd = process.cwd(), defaultPath = DEFAULT_CONFIG_PATH } = options;
  const args = parseServeArgs(argv);
  const envSettings = settingsFromEnv(env);

  let file: ConfigFile | null = null;
  if (args.configPath !== null) file = readConfigFile(resolve(cwd, args.configPath), cwd, '--config');
  else if (env.FLEETGATE_CONFIG) file = readConfigFile(resolve(cwd, env.FLEETGATE_CONFIG), cwd, 'FLEETGATE_CONFIG');
  else if (isFile(resolve(cwd, defaultPath))) file = readConfigFile(resolve(cwd, defaultPath), cwd, 'the default path');

  const raw: unknown = file === null ? structuredClone(EMBEDDED_CONFIG) : contentOf(file);
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new ConfigError('', `expected a mapping of settings, got ${describeValue(raw)}`, file && `in ${file.shown}`);
  }
  const layers = new Layers(raw as Record<string, unknown>);
  for (const setting of [...envSettings, ...args.settings]) layers.apply(setting);

  try {
    return { config: validateConfig(layers.raw, ''), path: file?.path ?? null, rest: args.rest };
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    const origin = layers.originOf(error.key);
    if (origin !== null) throw error.withSource(`from ${origin}`);
    if (file === null) throw error.withSource('in the built-in default config');
    const line = lineOf(file, error.key);
    throw error.withSource(`in ${file.shown}${line === null ? '' : `:${line}`}`);
  }
}

/** `fleetgate: config error: <key>: <problem> (in config/fleetgate.yaml:14)`, for stderr. */
export function formatConfigError(error: ConfigError): string {
  return `fleetgate: config error: ${error.message}${error.source === null ? '' : ` (${error.source})`}`;
}
