/**
 * ResponseRelay without sockets: a recording stand-in for the client's ServerResponse and for
 * undici's dispatch controller, driven by the handler calls undici would make.
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { test } from 'node:test';
import type { Dispatcher } from 'undici';
import {
  completionTokensIn,
  type RelayHooks,
  type RelayResult,
  ResponseRelay,
} from '../../src/proxy/response-relay.js';
import type { UpstreamFailure } from '../../src/proxy/upstream-errors.js';

/** What the client would receive. */
class ClientResponse extends EventEmitter {
  status: number | null = null;
  headers: string[] = [];
  written: string[] = [];
  writableEnded = false;
  destroyed = false;
  /** `write` answers false (the socket's buffer is full) while this is set. */
  full = false;

  writeHead(status: number, headers: string[]) {
    this.status = status;
    this.headers = headers;
    return this;
  }
  write(chunk: Buffer | string): boolean {
    this.written.push(String(chunk));
    return !this.full;
  }
  end(chunk?: string) {
    if (chunk !== undefined) this.written.push(chunk);
    this.writableEnded = true;
    return this;
  }
  destroy() {
    this.destroyed = true;
    return this;
  }
  cork() {}
  uncork() {}
  get body(): string {
    return this.written.join('');
  }
}

class Controller {
  paused = false;
  aborted: Error | null = null;
  pause() {
    this.paused = true;
  }
  resume() {
    this.paused = false;
  }
  abort(reason: Error) {
    this.aborted = reason;
  }
}

const SSE = { 'content-type': 'text/event-stream' };
const JSON_TYPE = { 'content-type': 'application/json' };

function setup(opts: { check?: RelayHooks['check']; clientStallTimeout?: number } = {}) {
  const client = new ClientResponse();
  const controller = new Controller();
  const ended: RelayResult[] = [];
  const started: Array<[number, boolean]> = [];
  let clock = 100;
  const relay = new ResponseRelay(
    client as unknown as ServerResponse,
    {
      check: opts.check ?? (() => null),
      started: (status, sse) => started.push([status, sse]),
      ended: (result) => ended.push(result),
    },
    { now: () => clock, clientStallTimeout: opts.clientStallTimeout ?? 0 },
  );
  const ctl = controller as unknown as Dispatcher.DispatchController;
  relay.onRequestStart(ctl);
  return {
    client,
    controller,
    relay,
    ended,
    started,
    ctl,
    tick: (ms: number) => {
      clock += ms;
    },
  };
}

function undiciError(code: string): Error {
  return Object.assign(new Error(code), { code });
}

test('a stream relays status, headers and every chunk, then ends complete, reported once', () => {
  const { client, relay, ended, started, ctl, tick } = setup();
  relay.onResponseStart(ctl, 200, { ...SSE, 'x-request-id': 'r1' });
  assert.deepEqual(started, [[200, true]]);
  assert.equal(client.status, 200);
  assert.deepEqual(client.headers, ['content-type', 'text/event-stream', 'x-request-id', 'r1']);
  tick(5);
  relay.onResponseData(ctl, Buffer.from('data: {"a":1}\n\n'));
  relay.onResponseData(ctl, Buffer.from('data: {"usage":{"completion_tokens":7}}\n\ndata: [DONE]\n\n'));
  relay.onResponseEnd();
  assert.equal(client.body, 'data: {"a":1}\n\ndata: {"usage":{"completion_tokens":7}}\n\ndata: [DONE]\n\n');
  assert.equal(client.writableEnded, true);
  assert.equal(ended.length, 1);
  const [result] = ended;
  assert.deepEqual(result.end, { type: 'complete' });
  assert.equal(result.started, true);
  assert.equal(result.bytes, Buffer.byteLength(client.body));
  assert.equal(result.firstByteAt, 105, 'on the relay clock');
  assert.match(String(result.tail), /completion_tokens":7/);
  relay.onResponseError(ctl, new Error('late'));
  assert.equal(ended.length, 1, 'an ending after the end is not reported');
});

test('an upstream dying mid-stream ends it with one error event and no [DONE]; a 504 is upstream_timeout', () => {
  const { client, relay, ended, ctl } = setup();
  relay.onResponseStart(ctl, 200, SSE);
  relay.onResponseData(ctl, Buffer.from('data: {"a":1}'));
  relay.onResponseError(ctl, undiciError('UND_ERR_BODY_TIMEOUT'));
  assert.equal(client.writableEnded, true);
  assert.equal(client.destroyed, false);
  const events = client.body.split('\n\n').filter(Boolean);
  assert.equal(events.length, 2, 'the cut event is closed before the error event');
  const error = JSON.parse(events[1].replace(/^data: /, '')).error;
  assert.deepEqual({ type: error.type, code: error.code }, { type: 'upstream_timeout', code: 504 });
  assert.ok(!client.body.includes('[DONE]'));
  assert.equal(ended.length, 1);
  assert.equal(ended[0].end.type, 'upstream_error');
  assert.equal((ended[0].end as { failure: UpstreamFailure }).failure.kind, 'stream_idle_timeout');
});

test('a reset mid-stream is upstream_error (502)', () => {
  const { client, relay, ctl } = setup();
  relay.onResponseStart(ctl, 200, SSE);
  relay.onResponseData(ctl, Buffer.from('data: {"a":1}\n\n'));
  relay.onResponseError(ctl, undiciError('ECONNRESET'));
  const error = JSON.parse(
    client.body
      .split('\n\n')
      .filter(Boolean)[1]
      .replace(/^data: /, ''),
  ).error;
  assert.deepEqual({ type: error.type, code: error.code }, { type: 'upstream_error', code: 502 });
});

test('a plain body cut mid-way destroys the client connection, so it cannot look complete', () => {
  const { client, relay, ended, ctl } = setup();
  relay.onResponseStart(ctl, 200, JSON_TYPE);
  relay.onResponseData(ctl, Buffer.from('{"choices":'));
  relay.onResponseError(ctl, undiciError('ECONNRESET'));
  assert.equal(client.destroyed, true);
  assert.equal(client.writableEnded, false);
  assert.equal(ended[0].end.type, 'upstream_error');
});

test('a failure before any response byte leaves the client untouched: the caller may retry', () => {
  const { client, relay, ended, ctl } = setup();
  relay.onResponseError(ctl, undiciError('ECONNREFUSED'));
  assert.equal(client.status, null);
  assert.equal(client.written.length, 0);
  assert.equal(client.destroyed, false);
  assert.equal(ended[0].started, false);
  const failure = (ended[0].end as { failure: UpstreamFailure }).failure;
  assert.equal(failure.retryable, true);
});

test('a response the check refuses aborts the upstream and writes nothing; 1xx is not the answer', () => {
  const refusal: UpstreamFailure = {
    kind: 'bad_response',
    outcome: 'http_5xx',
    status: 502,
    retryable: true,
    message: 'no',
  };
  const { client, relay, ended, controller, ctl } = setup({ check: (status) => (status === 503 ? refusal : null) });
  relay.onResponseStart(ctl, 100, {});
  assert.equal(ended.length, 0);
  relay.onResponseStart(ctl, 503, JSON_TYPE);
  assert.equal(client.status, null);
  assert.equal(controller.aborted?.message, 'no');
  assert.deepEqual(ended[0].end, { type: 'upstream_error', failure: refusal });
  assert.equal(ended[0].started, false);
});

test('the client leaving aborts the upstream, before or after undici connected', () => {
  const { relay, ended, controller } = setup();
  relay.cancel();
  assert.equal(controller.aborted?.name, 'ClientGoneError');
  assert.deepEqual(ended[0].end, { type: 'client_abort' });
  relay.cancel();
  assert.equal(ended.length, 1, 'reported once');

  const early = new ResponseRelay(
    new ClientResponse() as unknown as ServerResponse,
    {
      check: () => null,
      started: () => {},
      ended: () => {},
    },
    { now: () => 0, clientStallTimeout: 0 },
  );
  early.cancel();
  const late = new Controller();
  early.onRequestStart(late as unknown as Dispatcher.DispatchController);
  assert.equal(late.aborted?.name, 'ClientGoneError', 'aborted as soon as there is something to abort');
});

test('backpressure: a full client socket pauses the upstream until it drains', () => {
  const { client, relay, controller, ctl } = setup();
  relay.onResponseStart(ctl, 200, JSON_TYPE);
  client.full = true;
  relay.onResponseData(ctl, Buffer.from('x'));
  assert.equal(controller.paused, true);
  client.full = false;
  client.emit('drain');
  assert.equal(controller.paused, false);
});

test('a client that takes no bytes for the stall timeout is cut off and the upstream aborted', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const { client, relay, ended, controller, ctl } = setup({ clientStallTimeout: 1_000 });
  relay.onResponseStart(ctl, 200, JSON_TYPE);
  client.full = true;
  relay.onResponseData(ctl, Buffer.from('x'));
  t.mock.timers.tick(999);
  assert.equal(ended.length, 0);
  t.mock.timers.tick(1);
  assert.equal(client.destroyed, true);
  assert.equal(controller.aborted?.name, 'ClientGoneError');
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
