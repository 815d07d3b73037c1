/**
 * The config schema as a flat list of dotted keys (`routing.prefix.ttl`), walked from the rules in
 * src/config/validate.ts, so that the configuration reference test derives its keys from the code and
 * not from a hand-kept list. A key whose rule has `fields` (a section, or `fleet`, `discovery`, `launch`)
 * is listed and so are its fields; items of a list (`backends[]`, `queue.classes[]`, `launch.remedies[]`)
 * are not: their rules expose no fields.
 */

import type { Rule } from '../../src/config/rules.js';
import { CONFIG_SCHEMA } from '../../src/config/validate.js';

export interface SchemaKey {
  /** Dotted path, e.g. `health.interval`. */
  key: string;
  rule: Rule<unknown>;
  /** True for a key with fields of its own (a section). */
  section: boolean;
}

export function schemaKeys(rule: Rule<unknown> = CONFIG_SCHEMA, prefix = ''): SchemaKey[] {
  return Object.entries(rule.fields ?? {}).flatMap(([name, child]) => {
    const key = prefix === '' ? name : `${prefix}.${name}`;
    const self = { key, rule: child, section: child.fields !== undefined };
    return [self, ...schemaKeys(child, key)];
  });
}

/** The value a key takes when absent, or undefined when the key is required. */
export function defaultOf(rule: Rule<unknown>): unknown {
  return rule.fallback?.();
}
