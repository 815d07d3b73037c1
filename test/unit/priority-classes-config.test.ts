import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError } from '../../src/config/errors.js';
import { validateConfig } from '../../src/config/validate.js';
import { createTraitsReader } from '../../src/proxy/request-traits-from.js';
import { queueClassOptions } from '../../src/routing/queue/classes-from-config.js';

const ONE_BACKEND = { backends: ['http://127.0.0.1:30000'] };

test('default: interactive above batch, batch the default class, promotion after 60 s, no reserve', () => {
  const { queue } = validateConfig(ONE_BACKEND, 'test');
  assert.deepEqual(
    queue.classes.map((c) => c.name),
    ['interactive', 'batch'],
  );
  assert.equal(queue.default_class, 'batch');
  assert.equal(queue.max_starvation, 60_000);
  assert.equal(queue.reserve, 0);
});

test('a class may be a mapping with its own limits; unset limits fall back to the queue`s', () => {
  const config = validateConfig(
    {
      ...ONE_BACKEND,
      queue: {
        max_waiting: 500,
        timeout: '30s',
        classes: [{ name: 'interactive', max_waiting: 10, timeout: '5s', api_keys: ['sk-app'] }, 'batch'],
      },
    },
    'test',
  );
  const { classes, defaultClass } = queueClassOptions(config);
  assert.equal(defaultClass, 'batch');
  assert.deepEqual(classes, [
    { name: 'interactive', maxWaiting: 10, timeoutMs: 5_000, timeoutOnlyWhenNoneReady: false },
    { name: 'batch', maxWaiting: 500, timeoutMs: 30_000, timeoutOnlyWhenNoneReady: true },
  ]);
});

const BAD: Array<[string, unknown, string]> = [
  ['empty class list', { classes: [] }, 'queue.classes: needs at least one class (highest first)'],
  ['duplicate class', { classes: ['a', 'a'], default_class: 'a' }, 'queue.classes[1].name: class "a" is defined twice'],
  [
    'bad class name',
    { classes: ['a b'] },
    'queue.classes[0]: "a b" may contain only letters, digits, "_", "." and "-"',
  ],
  [
    'unknown default class',
    { classes: ['hi', 'lo'], default_class: 'batch' },
    'queue.default_class: "batch" is not one of the classes (hi, lo)',
  ],
  [
    'one key in two classes',
    {
      classes: [
        { name: 'hi', api_keys: ['k'] },
        { name: 'batch', api_keys: ['k'] },
      ],
    },
    'queue.classes[1].api_keys[0]: this key is already in class "hi"',
  ],
  [
    'negative class max_waiting',
    { classes: [{ name: 'batch', max_waiting: -1 }] },
    'queue.classes[0].max_waiting: expected an integer >= 0, got -1',
  ],
  ['unknown class key', { classes: [{ name: 'batch', priority: 3 }] }, 'queue.classes[0].priority'],
  ['negative reserve', { reserve: -1 }, 'queue.reserve: expected an integer >= 0, got -1'],
  ['max_starvation without unit', { max_starvation: 30 }, 'queue.max_starvation: 30 has no unit (e.g. 500ms, 10s)'],
];

for (const [name, queue, message] of BAD) {
  test(`rejects ${name}`, () => {
    assert.throws(
      () => validateConfig({ ...ONE_BACKEND, queue }, 'test'),
      (error: unknown) => error instanceof ConfigError && error.message.startsWith(message),
    );
  });
}

test('traits: the header first, then the API key`s class, then the default class', () => {
  const { queue } = validateConfig(
    { ...ONE_BACKEND, queue: { classes: [{ name: 'interactive', api_keys: ['sk-app'] }, 'batch'] } },
    'test',
  );
  const read = createTraitsReader(queue);
  assert.deepEqual(read({}).traits, { priority: 'batch', apiKey: null });
  assert.deepEqual(read({ authorization: 'Bearer sk-app' }).traits, { priority: 'interactive', apiKey: 'sk-app' });
  assert.deepEqual(read({ authorization: 'Bearer sk-other' }).traits, { priority: 'batch', apiKey: 'sk-other' });
  assert.deepEqual(read({ authorization: 'Bearer sk-app', 'x-fleetgate-priority': 'batch' }).traits, {
    priority: 'batch',
    apiKey: 'sk-app',
  });
  assert.deepEqual(read({ 'x-fleetgate-priority': ' interactive ' }).traits, { priority: 'interactive', apiKey: null });
});

test('traits: an unknown class is a problem naming the known ones', () => {
  const { queue } = validateConfig(ONE_BACKEND, 'test');
  const result = createTraitsReader(queue)({ 'x-fleetgate-priority': 'urgent' });
  assert.equal(result.traits, null);
  assert.equal(
    result.problem,
    'unknown priority class "urgent" in X-Fleetgate-Priority (known classes: interactive, batch)',
  );
});
