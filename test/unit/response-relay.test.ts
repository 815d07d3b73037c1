/**
 * The response relay without sockets: a PassThrough stands for the upstream body that
 * @fastify/reply-from hands over, and a recording stand-in for the client's ServerResponse.
 */
import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { completionTokensIn } from '../../src/proxy/answer-tail.js';
import { type RelayResult, relayBody } from '../../src/proxy/response-relay.js';
import type { UpstreamFailure } from '../../src/routing/dispatch/upstream-failures.js';
import { ClientResponse } from '../helpers/client-response.js';

function setup(opts: { sse?: boolean; clientStallTimeout?: number } = {}) {
  const client = new ClientResponse();
  const body = new PassThrough();
  const ended: RelayResult[] = [];
  let clock = 100;
  relayBody(body, client as unknown as ServerResponse, {
    sse: opts.sse ?? true,
    now: () => clock,
    clientStallTimeout: opts.clientStallTimeout ?? 0,
    ended: (result) => ended.push(result),
  });
  return {
    client,
    body,
    ended,
    tick: (ms: number) => {
      clock += ms;
    },
  };
}

/** Lets the stream events of this turn (end, error, close) run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

function undiciError(code: string): Error {
  return Object.assign(new Error(code), { code });
}

function errorEvent(client: ClientResponse) {
  const events = client.body.split('\n\n').filter(Boolean);
  return { events, error: JSON.parse(events[events.length - 1].replace(/^data: /, '')).error };
}

test('a stream relays every chunk, then ends complete, reported once', async () => {
  const { client, body, ended, tick } = setup();
  tick(5);
  body.write('data: {"a":1}\n\n');
  body.end('data: {"usage":{"completion_tokens":7}}\n\ndata: [DONE]\n\n');
  await settle();
  assert.equal(client.body, 'data: {"a":1}\n\ndata: {"usage":{"completion_tokens":7}}\n\ndata: [DONE]\n\n');
  assert.equal(client.writableEnded, true);
  assert.equal(ended.length, 1);
  const [result] = ended;
  assert.deepEqual(result.end, { type: 'complete' });
  assert.equal(result.bytes, Buffer.byteLength(client.body));
  assert.equal(result.firstByteAt, 105, 'on the relay clock');
  assert.equal(completionTokensIn(result.tail), 7);
  client.emit('close');
  await settle();
  assert.equal(ended.length, 1, 'an ending after the end is not reported');
});

test('an upstream dying mid-stream ends it with one error event and no [DONE]; a 504 is upstream_timeout', async () => {
  const { client, body, ended } = setup();
  body.write('data: {"a":1}');
  body.destroy(undiciError('UND_ERR_BODY_TIMEOUT'));
  await settle();
  assert.equal(client.writableEnded, true);
  assert.equal(client.destroyed, false);
  const { events, error } = errorEvent(client);
  assert.equal(events.length, 2, 'the cut event is closed before the error event');
  assert.deepEqual({ type: error.type, code: error.code }, { type: 'upstream_timeout', code: 504 });
  assert.ok(!client.body.includes('[DONE]'));
  assert.equal(ended.length, 1);
  assert.equal(ended[0].end.type, 'upstream_error');
  assert.equal((ended[0].end as { failure: UpstreamFailure }).failure.kind, 'stream_idle_timeout');
});

test('a reset mid-stream is upstream_error (502)', async () => {
  const { client, body } = setup();
  body.write('data: {"a":1}\n\n');
  body.destroy(undiciError('ECONNRESET'));
  await settle();
  const { events, error } = errorEvent(client);
  assert.equal(events.length, 2, 'no blank event between a whole event and the error event');
  assert.deepEqual({ type: error.type, code: error.code }, { type: 'upstream_error', code: 502 });
});

test('a plain body cut mid-way destroys the client connection, so it cannot look complete', async () => {
  const { client, body, ended } = setup({ sse: false });
  body.write('{"choices":');
  body.destroy(undiciError('ECONNRESET'));
  await settle();
  assert.equal(client.destroyed, true);
  assert.equal(client.writableEnded, false);
  assert.equal(ended[0].end.type, 'upstream_error');
});

test('the client leaving destroys the upstream body (undici then aborts the request), reported once', async () => {
  const { client, body, ended } = setup();
  body.write('data: {"a":1}\n\n');
  client.emit('close');
  await settle();
  assert.equal(body.destroyed, true);
  assert.deepEqual(
    ended.map((result) => result.end),
    [{ type: 'client_abort' }],
  );
  client.emit('close');
  assert.equal(ended.length, 1);
});

test('backpressure: a full client socket pauses the upstream body until it drains', async () => {
  const { client, body } = setup({ sse: false });
  client.full = true;
  body.write('x');
  await settle();
  assert.equal(body.isPaused(), true);
  client.full = false;
  client.emit('drain');
  assert.equal(body.isPaused(), false);
});

test('a client that takes no bytes for the stall timeout is cut off and the upstream body destroyed', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const { client, body, ended } = setup({ sse: false, clientStallTimeout: 1_000 });
  client.full = true;
  body.write('x');
  t.mock.timers.tick(999);
  assert.equal(ended.length, 0);
  t.mock.timers.tick(1);
  assert.equal(client.destroyed, true);
  assert.equal(body.destroyed, true);
  assert.deepEqual(ended[0].end, { type: 'client_abort' });
});

test('completion tokens: the last usage figure in the tail', () => {
  const chat = Buffer.from('{"usage":{"prompt_tokens":5,"total_tokens":37,"completion_tokens":32}}');
  assert.equal(completionTokensIn(chat), 32);
  const sse = Buffer.from(
    'data: {"usage":{"completion_tokens": 7}}\n\ndata: {"usage":{"completion_tokens": 12}}\n\ndata: [DONE]\n\n',
  );
  assert.equal(completionTokensIn(sse), 12);
  assert.equal(completionTokensIn(Buffer.from('{"meta_info":{"completion_tokens":0}}')), 0);
});

test('completion tokens: absent or cut figures are unknown', () => {
  assert.equal(completionTokensIn(null), null);
  assert.equal(completionTokensIn(Buffer.from('data: {"usage":null}\n\n')), null);
  assert.equal(completionTokensIn(Buffer.from('{"completion_tokens":')), null);
});
