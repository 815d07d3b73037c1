/** The one reader of a proxied request for admission: class, prompt traits, model queue, stream flag. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ModelRefusal } from '../../src/proxy/model-admission.js';
import {
  asksForStream,
  type ContextRefusal,
  createContextReader,
  jsonOnce,
  type ReadRequest,
} from '../../src/proxy/request-context-from.js';
import type { TraitsReader } from '../../src/proxy/request-traits-from.js';
import type { WaitQueue } from '../../src/routing/queue/wait-queue.js';
import { RequestContext } from '../../src/routing/request-context.js';

const queueA = { acquire: () => Promise.reject(new Error('not used')) } as unknown as WaitQueue;
const traitsOf: TraitsReader = (headers) =>
  headers['x-fleetgate-priority'] === 'nope'
    ? { traits: null, problem: 'unknown priority class "nope"' }
    : { traits: { priority: 'default', apiKey: null }, problem: null };
const body = (json: unknown) => Buffer.from(JSON.stringify(json));

test('a request is read into one context: its class, its model queue and its stream flag', () => {
  const read = createContextReader({ traitsOf, admission: () => queueA, watchStreams: () => true });
  const { context } = read('/v1/chat/completions', {}, body({ model: 'a', stream: true })) as ReadRequest;
  assert.ok(context instanceof RequestContext);
  assert.deepEqual(context.traits, { priority: 'default', apiKey: null });
  assert.equal(context.queue, queueA);
  assert.equal(context.streamed, true);
  // A batch's streamed request is no client's stream: the watchdog's first-byte rule leaves it be.
  const batch = read('/v1/chat/completions', { 'x-fleetgate-batch': '1' }, body({ stream: true })) as ReadRequest;
  assert.equal(batch.context.streamed, false);
});

test('prompt traits join the class traits only when the policy asks for them', () => {
  const read = createContextReader({
    traitsOf,
    admission: () => queueA,
    promptTraits: () => ({ prefix: [7], blockChars: 64 }),
    watchStreams: () => false,
  });
  const { context } = read('/v1/completions', {}, body({ prompt: 'x' })) as ReadRequest;
  assert.deepEqual(context.traits, { priority: 'default', apiKey: null, prefix: [7], blockChars: 64 });
  assert.equal(context.streamed, false, 'the stream flag is read only while the watchdog is on');
});

test('an unknown class is refused 400 with no record; an unserved model with the admission refusal', () => {
  const refusal: ModelRefusal = { status: 404, type: 'model_not_found', message: 'model "b" is not served here' };
  const read = createContextReader({ traitsOf, admission: () => refusal, watchStreams: () => false });
  const badClass = read('/v1/completions', { 'x-fleetgate-priority': 'nope' }, null) as ContextRefusal;
  assert.deepEqual(badClass, {
    status: 400,
    type: 'invalid_request_error',
    message: 'unknown priority class "nope"',
    outcome: null,
  });
  const badModel = read('/v1/completions', {}, body({ model: 'b' })) as ContextRefusal;
  assert.deepEqual(badModel, { ...refusal, outcome: 'model_refused' });
});

test('asksForStream finds "stream": true with any spacing, and not false or a string mention', () => {
  assert.equal(asksForStream(Buffer.from('{"model":"m","stream" :\n true}')), true);
  assert.equal(asksForStream(Buffer.from('{"stream": false}')), false);
  assert.equal(asksForStream(Buffer.from('{"prompt":"the \\"stream\\" word","stream":false}')), false);
  assert.equal(asksForStream(null), false);
  // Only the body's own field counts: a tool's schema may name a "stream" property of its own.
  const tool = { type: 'function', function: { name: 'f', parameters: { stream: true } } };
  assert.equal(asksForStream(Buffer.from(JSON.stringify({ model: 'm', tools: [tool], stream: false }))), false);
  assert.equal(asksForStream(Buffer.from(JSON.stringify({ tools: [tool], stream: true }))), true);
});

test('the body is parsed once, only when asked, and every reader gets that one value', () => {
  let parses = 0;
  const parse = JSON.parse;
  JSON.parse = ((text: string) => {
    parses++;
    return parse(text);
  }) as typeof JSON.parse;
  try {
    const seen: unknown[] = [];
    const read = createContextReader({
      traitsOf,
      admission: (json) => {
        seen.push(json());
        return queueA;
      },
      promptTraits: (_path, _headers, json) => {
        seen.push(json);
        return undefined;
      },
      watchStreams: () => false,
    });
    const { json } = read('/v1/completions', {}, body({ model: 'a', prompt: 'x' })) as ReadRequest;
    seen.push(json());
    assert.equal(parses, 1, 'admission, prompt traits and the later readers share one parse');
    assert.deepEqual(seen[0], { model: 'a', prompt: 'x' });
    assert.ok(seen.every((value) => value === seen[0]));

    const lazy = createContextReader({ traitsOf, admission: () => queueA, watchStreams: () => false });
    lazy('/v1/completions', {}, body({ model: 'a' }));
    assert.equal(parses, 1, 'a reader that needs no field of the body never parses it');
  } finally {
    JSON.parse = parse;
  }
  assert.equal(jsonOnce(Buffer.from('not json'))(), undefined);
  assert.equal(jsonOnce(null)(), undefined);
});
