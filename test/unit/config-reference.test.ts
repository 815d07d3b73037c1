/**
 * The configuration reference cannot drift from the code: every key the schema in src/config accepts
 * (walked from its rules, not a hand list) is documented in docs/configuration.md with the schema's own
 * default, and appears in config/fleetgate.yaml with that default; no documented key is unknown to the
 * schema. Defaults are compared after the schema's own parsing, so `10s` in the docs equals 10,000 ms.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { parse as parseYaml } from 'yaml';
import type { Rule } from '../../src/config/rules.js';
import { defaultOf, type SchemaKey, schemaKeys } from '../helpers/config-schema.js';

const root = join(import.meta.dirname, '../..');
const REFERENCE = 'docs/configuration.md';
const SHIPPED = 'config/fleetgate.yaml';
/** The one key whose value in config/fleetgate.yaml is an example, not its default (the file says so). */
const EXAMPLE_IN_SHIPPED = new Set(['backends']);

interface DocumentedKey {
  key: string;
  /** The default cell: a YAML value in backticks, or `required`. */
  cell: string;
  line: number;
}

/** Rows `| \`dotted.key\` | default | meaning |` of the reference's tables. */
function documentedKeys(markdown: string): DocumentedKey[] {
  return markdown.split('\n').flatMap((text, index) => {
    const row = /^\|\s*`([A-Za-z0-9_.]+)`\s*\|\s*(.*?)\s*\|/.exec(text);
    return row === null ? [] : [{ key: row[1], cell: row[2], line: index + 1 }];
  });
}

/** The value a documented default cell stands for, through the key's own rule; `undefined` for `required`. */
function documentedDefault(entry: DocumentedKey, rule: Rule<unknown>): unknown {
  if (entry.cell === 'required') return undefined;
  const code = /^`([^`]*)`$/.exec(entry.cell);
  if (code === null) throw new Error(`${REFERENCE}:${entry.line}: ${entry.key}: default must be \`value\` or required`);
  return rule.parse(parseYaml(code[1]), entry.key);
}

/**
 * config/fleetgate.yaml as one mapping: its live keys, plus the keys of commented-out sections
 * (`# launch:` followed by `#   key: value` lines), which show the defaults of sections that are off.
 */
interface Shipped {
  live: unknown;
  commented: Record<string, unknown>;
}

function shippedValues(text: string): Shipped {
  const live: unknown = parseYaml(text);
  const commented: Record<string, unknown> = {};
  for (const block of text.matchAll(/^# ([a-z_]+):[ \t]*\n((?:#[ \t]{2,}.*\n)+)/gm)) {
    const body = block[2].replace(/^# ?/gm, '');
    commented[block[1]] = parseYaml(`${block[1]}:\n${body}`)[block[1]];
  }
  return { live, commented };
}

function lookup(values: unknown, key: string): unknown {
  let value = values;
  for (const part of key.split('.')) {
    value = value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[part] : undefined;
  }
  return value;
}

function shippedValue(shipped: Shipped, key: string): unknown {
  const live = lookup(shipped.live, key);
  return live !== undefined ? live : lookup(shipped.commented, key);
}

const schema = schemaKeys();
const byKey = new Map<string, SchemaKey>(schema.map((entry) => [entry.key, entry]));

test('the schema walk finds keys at every depth, required ones included', () => {
  const keys = schema.map((entry) => entry.key);
  for (const key of ['listen', 'health.interval', 'routing.prefix.queue_hold', 'launch.command', 'discovery.port']) {
    assert.ok(keys.includes(key), `the walk finds ${key}`);
  }
  assert.equal(defaultOf(byKey.get('launch.command')?.rule as Rule<unknown>), undefined, 'launch.command is required');
  assert.ok(schema.length > 80, `found ${schema.length} keys`);
});

test(`every config key is documented in ${REFERENCE} with its actual default`, () => {
  const documented = new Map(documentedKeys(readFileSync(join(root, REFERENCE), 'utf8')).map((d) => [d.key, d]));
  const problems: string[] = [];
  for (const { key, rule, section } of schema) {
    const entry = documented.get(key);
    if (entry === undefined) {
      if (!section) problems.push(`${key}: not documented in ${REFERENCE}`);
      continue;
    }
    const actual = defaultOf(rule);
    let written: unknown;
    try {
      written = documentedDefault(entry, rule);
    } catch (error) {
      problems.push(`${key}: documented default ${entry.cell} is not valid: ${(error as Error).message}`);
      continue;
    }
    if (!isDeepStrictEqual(written, actual)) {
      problems.push(
        `${key}: documented default ${entry.cell} is not the schema's ${JSON.stringify(actual) ?? 'required'}`,
      );
    }
  }
  assert.deepEqual(problems, [], 'keys missing from or wrong in the configuration reference');
});

test(`every key documented in ${REFERENCE} is one the schema accepts`, () => {
  const unknown = documentedKeys(readFileSync(join(root, REFERENCE), 'utf8'))
    .filter((entry) => !byKey.has(entry.key))
    .map((entry) => `${REFERENCE}:${entry.line}: ${entry.key} is unknown to the config schema`);
  assert.deepEqual(unknown, [], 'documented keys the schema does not accept');
});

test(`every config key appears in ${SHIPPED} with its actual default`, () => {
  const shipped = shippedValues(readFileSync(join(root, SHIPPED), 'utf8'));
  const problems: string[] = [];
  for (const { key, rule, section } of schema) {
    if (section) continue;
    const value = shippedValue(shipped, key);
    if (value === undefined) {
      problems.push(`${key}: not in ${SHIPPED} (as a key, or in a commented-out section)`);
      continue;
    }
    const actual = defaultOf(rule);
    if (actual === undefined || EXAMPLE_IN_SHIPPED.has(key)) continue;
    let written: unknown;
    try {
      written = rule.parse(value, key);
    } catch (error) {
      problems.push(`${key}: ${SHIPPED} has an invalid value: ${(error as Error).message}`);
      continue;
    }
    if (!isDeepStrictEqual(written, actual))
      problems.push(`${key}: ${SHIPPED} has ${JSON.stringify(value)}, the default is ${JSON.stringify(actual)}`);
  }
  assert.deepEqual(problems, [], `keys missing from or wrong in ${SHIPPED}`);
});
