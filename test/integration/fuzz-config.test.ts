/**
 * Generated YAML configs against the loader `fleetgate serve` and `launch` use (`loadConfig` on a
 * real file): the shipped config/fleetgate.yaml with one key set to a generated value (a wrong type,
 * an odd string, a nested structure, null), whole generated documents, and text that is not YAML.
 * Every case loads or fails with a ConfigError; a ConfigError from one changed key names that key
 * (or a key inside it); nothing else is ever thrown.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import fc from 'fast-check';
import { parse, stringify } from 'yaml';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { REPO } from '../helpers/cli-entry.js';

const dir = mkdtempSync(join(tmpdir(), 'fuzz-config-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const file = join(dir, 'fleetgate.yaml');
const shipped = parse(readFileSync(join(REPO, 'config/fleetgate.yaml'), 'utf8')) as Record<string, unknown>;

/** Every key path of the shipped config, containers and leaves (`health.interval`, `backends[2].url`). */
function keyPaths(value: unknown, prefix: string, out: string[]): string[] {
  if (prefix !== '') out.push(prefix);
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) keyPaths(item, `${prefix}[${i}]`, out);
  } else if (value !== null && typeof value === 'object')
    for (const [key, item] of Object.entries(value)) keyPaths(item, prefix === '' ? key : `${prefix}.${key}`, out);
  return out;
}
const PATHS = keyPaths(shipped, '', []);

function setAt(root: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.match(/[^.[\]]+/g) ?? [];
  let node = root as Record<string, unknown>;
  for (const part of parts.slice(0, -1)) node = node[part] as Record<string, unknown>;
  node[parts.at(-1) as string] = value;
}

const oddValue = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  fc.constantFrom('', ' ', '0', '-1', '1e400', 'NaN', '10', '10x', '-5s', '1.5m', '0s', '99999999h', '32MiB'),
  fc.constantFrom('8 GiB', 'auto', 'yes', 'null', '{i}', '{gpu}', '(', '[a-', 'http://', 'unix:/x', '127.0.0.1:99999'),
  fc.string({ maxLength: 30 }),
  fc.integer(),
  fc.double(),
);

/** Loads `text` as the config file: the config, or the ConfigError; anything else fails the case. */
function load(text: string): ConfigError | null {
  writeFileSync(file, text);
  try {
    loadConfig({ argv: ['--config', file], env: {}, cwd: dir });
    return null;
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw new Error(`not a ConfigError for ${JSON.stringify(text.slice(0, 300))}: ${(error as Error).stack}`);
  }
}

/**
 * Whether an error key names the change: the changed key, a key within it (`backends[1]` for a change
 * at `backends`), or, for a rule across keys, one in the same section (`queue.default_class` is not
 * among a changed `queue.classes`).
 */
function names(errorKey: string, changed: string): boolean {
  const section = (key: string) => key.split(/[.[]/)[0];
  return (
    errorKey === changed ||
    errorKey.startsWith(`${changed}.`) ||
    errorKey.startsWith(`${changed}[`) ||
    (errorKey !== '' && section(errorKey) === section(changed))
  );
}

test('fuzz: the shipped config with one key changed loads, or its error names that key', () => {
  let cases = 0;
  let refused = 0;
  fc.assert(
    fc.property(fc.constantFrom(...PATHS), oddValue, (path, value) => {
      cases++;
      const config = structuredClone(shipped);
      setAt(config, path, value);
      const error = load(stringify(config));
      if (error === null) return;
      refused++;
      assert.ok(error.problem !== '', `${path}: an empty problem`);
      assert.ok(
        names(error.key, path),
        `${path} = ${JSON.stringify(value)}: the error names "${error.key}": ${error.message}`,
      );
    }),
    { numRuns: 1500 },
  );
  assert.ok(refused > cases / 3, `${refused} of ${cases} refused: the generator makes mostly wrong values`);
});

/** Each level refers to the one before ten times: 10^8 values if expanded. */
function aliasBomb(): string {
  const lines = ['a0: &a0 [x, x, x, x, x, x, x, x, x, x]'];
  for (let i = 1; i <= 8; i++)
    lines.push(
      `a${i}: &a${i} [${Array(10)
        .fill(`*a${i - 1}`)
        .join(', ')}]`,
    );
  return lines.join('\n');
}

test('fuzz: generated documents and text that is not YAML give a ConfigError or a config, nothing else', () => {
  const keys = [...Object.keys(shipped), 'lisen', 'backend', 'Health', '', '0'];
  const doc = fc.dictionary(fc.constantFrom(...keys), oddValue, { maxKeys: 5 });
  fc.assert(
    fc.property(
      fc.oneof(
        doc.map((d) => stringify(d)),
        fc.string({ maxLength: 120 }),
        fc.constantFrom('', '---', '- a\n- b', 'a: [', 'a: &x\n  b: *x', '!!binary x', 'listen: !!js/function x', '\t'),
        // Regressions: an alias to no anchor, and an alias bomb, used to throw past ConfigError.
        fc.constantFrom('*!', 'listen: *nowhere', aliasBomb()),
      ),
      (text) => {
        const error = load(text);
        if (error !== null) assert.ok(error.message !== '', JSON.stringify(text));
      },
    ),
    { numRuns: 1000 },
  );
});

test('regression: YAML that fails only when read as values is a config error, not a stack trace', () => {
  for (const text of ['*!', 'listen: *nowhere', aliasBomb()]) {
    const error = load(text);
    assert.ok(error instanceof ConfigError, text.slice(0, 40));
    assert.match(error.message, /^invalid YAML: /);
  }
});
