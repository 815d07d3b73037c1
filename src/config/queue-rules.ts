/**
 * Schema rules for the priority classes of the central queue (`queue.classes`, `queue.default_class`):
 * each class a name (or a mapping with its own limits and API keys), names unique, the default class
 * one of them, an API key in one class at most.
 */
import * as defaults from './defaults.js';
import { describeValue } from './errors.js';
import { isObject } from './json-object.js';
import { duration, fail, integer, list, nullable, type Rule, section, text, textToStructure } from './rules.js';
import type { PriorityClassConfig } from './types.js';

const CLASS_NAME = /^[A-Za-z0-9_.-]+$/;

const className = text(undefined, (name, key) => {
  if (!CLASS_NAME.test(name)) fail(key, `${describeValue(name)} may contain only letters, digits, "_", "." and "-"`);
});

const classMapping = section({
  name: className,
  max_waiting: nullable(integer({ min: 0 })),
  timeout: nullable(duration(undefined)),
  api_keys: list(text()),
  backend_priority: nullable(integer({ min: -1_000_000, max: 1_000_000 })),
});

/** A class named and nothing more: the queue's limits, no API keys, nothing sent to the backend. */
function unnamedClass(): Omit<PriorityClassConfig, 'name'> {
  return { max_waiting: null, timeout: null, api_keys: [], backend_priority: null };
}

/** A class is its name alone, or a mapping. */
const classEntry: Rule<PriorityClassConfig> = {
  fromText: textToStructure,
  fields: classMapping.fields,
  parse(value, key) {
    if (typeof value === 'string') return { ...unnamedClass(), name: className.parse(value, key) };
    if (!isObject(value))
      fail(
        key,
        `expected a class name or a mapping of name, max_waiting, timeout, api_keys, backend_priority, got ${describeValue(value)}`,
      );
    return classMapping.parse(value, key);
  },
};

const classList = list(classEntry);

export const priorityClasses: Rule<PriorityClassConfig[]> = {
  fallback: () => defaults.DEFAULT_QUEUE_CLASSES.map((name) => ({ ...unnamedClass(), name })),
  fromText: textToStructure,
  parse(value, key) {
    const classes = classList.parse(value, key);
    if (classes.length === 0) fail(key, 'needs at least one class (highest first)');
    const names = new Set<string>();
    const keys = new Map<string, string>();
    classes.forEach((cls, i) => {
      if (names.has(cls.name)) fail(`${key}[${i}].name`, `class "${cls.name}" is defined twice`);
      names.add(cls.name);
      cls.api_keys.forEach((apiKey, j) => {
        const other = keys.get(apiKey);
        if (other !== undefined) fail(`${key}[${i}].api_keys[${j}]`, `this key is already in class "${other}"`);
        keys.set(apiKey, cls.name);
      });
    });
    // SGLang's priority scheduler sorts its queue by the value and fails on a request without one
    // (unless started with --default-priority-value), so a fleet either gets it on every request or on none.
    const withPriority = classes.filter((cls) => cls.backend_priority !== null).length;
    if (withPriority > 0 && withPriority < classes.length) {
      const missing = classes.findIndex((cls) => cls.backend_priority === null);
      fail(
        `${key}[${missing}].backend_priority`,
        'set it on every class or on none (SGLang needs a priority on every request)',
      );
    }
    return classes;
  },
};

/** Checks what only the whole `queue` section can tell: the default class is a configured one. */
export function checkDefaultClass(classes: readonly PriorityClassConfig[], defaultClass: string): void {
  if (!classes.some((cls) => cls.name === defaultClass)) {
    fail(
      'queue.default_class',
      `"${defaultClass}" is not one of the classes (${classes.map((c) => c.name).join(', ')})`,
    );
  }
}
