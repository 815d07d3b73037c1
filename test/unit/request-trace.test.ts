/**
 * A request's spans (proxy/request-trace.ts) with the real SDK and an in-memory exporter: a recorded
 * request reads its GenAI attributes from its body and its answer's tail; a request the sampler
 * leaves out (`sample_ratio` 0, or an incoming `traceparent` flagged unsampled) still hands its
 * trace on upstream, exports nothing and reads neither its body nor its answer.
 */
import assert from 'node:assert/strict';
import type { IncomingHttpHeaders } from 'node:http';
import { test } from 'node:test';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import type { RequestRecord } from '../../src/proxy/proxy-events.js';
import { RequestSpan } from '../../src/proxy/request-trace.js';
import { Tracing } from '../../src/tracing/tracing.js';

const PATH = '/v1/chat/completions';
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const body = () =>
  Buffer.from(JSON.stringify({ model: 'm', max_tokens: 64, temperature: 0.5, stream: true, messages: [] }));
const tail = () =>
  Buffer.from(
    'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\n' +
      'data: {"choices":[],"usage":{"prompt_tokens":80,"completion_tokens":64}}\n\ndata: [DONE]\n\n',
  );
const record: RequestRecord = {
  backend: 'gpu0',
  method: 'POST',
  path: PATH,
  status: 200,
  durationMs: 5,
  ttfbMs: 1,
  priorityClass: 'batch',
  queueMs: 0,
  bytes: 100,
  retries: 0,
  resumes: 0,
  backends: [],
  outcome: 'ok',
  completionTokens: 70,
  streamed: true,
};

function tracingAt(sampleRatio: number) {
  const exporter = new InMemorySpanExporter();
  const config = {
    otlp_endpoint: 'http://127.0.0.1:9/',
    otlp_protocol: 'http/protobuf' as const,
    sample_ratio: sampleRatio,
    service_name: 'fleetgate-test',
  };
  return { tracing: new Tracing(config, exporter), exporter };
}

/** `buffer`, counting every read of it (an index, `length`, a method). */
function counted(buffer: Buffer): { buffer: Buffer; reads: () => number } {
  let reads = 0;
  const proxy = new Proxy(buffer, {
    get(target, key) {
      reads++;
      const value = Reflect.get(target, key, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { buffer: proxy, reads: () => reads };
}

/** One request's trace through an attempt, its body and answer counted. */
async function traced(sampleRatio: number, headers: IncomingHttpHeaders = {}) {
  const { tracing, exporter } = tracingAt(sampleRatio);
  const request = new RequestSpan(tracing, 'POST', PATH, headers, performance.now());
  const sent = counted(body());
  const answer = counted(tail());
  request.describe(sent.buffer);
  const attempt = request.attempt('gpu0', 0);
  attempt.responded(200);
  attempt.ended(null);
  request.end(record, { tail: answer.buffer, ttftSeconds: 0.25 }, performance.now());
  await tracing.flush();
  const spans = exporter.getFinishedSpans();
  await tracing.shutdown();
  return { request, attempt, spans, bodyReads: sent.reads(), tailReads: answer.reads() };
}

test('a recorded request: GenAI attributes from its body and from its answer tail', async () => {
  const { request, spans, bodyReads, tailReads } = await traced(1);
  assert.equal(request.recording, true);
  assert.equal(spans.length, 2, 'a server span and an attempt span');
  const server = spans.find((s) => s.name === `POST ${PATH}` && s.parentSpanContext === undefined);
  assert.ok(server, 'the server span');
  assert.equal(server.attributes['gen_ai.request.model'], 'm');
  assert.equal(server.attributes['gen_ai.request.max_tokens'], 64);
  assert.equal(server.attributes['gen_ai.usage.input_tokens'], 80);
  assert.equal(
    server.attributes['gen_ai.usage.output_tokens'],
    70,
    "the record's count (a resumed stream's), not the tail's",
  );
  assert.deepEqual(server.attributes['gen_ai.response.finish_reasons'], ['stop']);
  assert.equal(server.attributes['gen_ai.server.time_to_first_token'], 0.25);
  assert.ok(bodyReads > 0 && tailReads > 0, 'the body and the tail were read');
});

for (const [why, ratio, headers] of [
  ['sample_ratio 0', 0, {}],
  ['an incoming traceparent flagged unsampled', 1, { traceparent: `00-${TRACE_ID}-00f067aa0ba902b7-00` }],
] as const) {
  test(`an unsampled request (${why}): its trace handed on, nothing exported, body and answer not read`, async () => {
    const { request, attempt, spans, bodyReads, tailReads } = await traced(ratio, headers);
    assert.equal(request.recording, false);
    assert.equal(spans.length, 0, 'no span exported');
    assert.match(attempt.headers.traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/, 'upstream gets an unsampled parent');
    if ('traceparent' in headers) assert.equal(attempt.headers.traceparent.split('-')[1], TRACE_ID);
    assert.equal(bodyReads, 0, 'the body was not scanned');
    assert.equal(tailReads, 0, "the answer's tail was not scanned");
  });
}

test("an attempt's span is named by the request's method and path, as the server span is", async () => {
  const { tracing, exporter } = tracingAt(1);
  const request = new RequestSpan(tracing, 'GET', '/get_server_info', {}, performance.now());
  request.attempt('gpu0', 0).ended(null);
  request.end(
    { ...record, method: 'GET', path: '/get_server_info' },
    { tail: null, ttftSeconds: null },
    performance.now(),
  );
  await tracing.flush();
  const names = exporter.getFinishedSpans().map((s) => s.name);
  await tracing.shutdown();
  assert.deepEqual(names, ['GET /get_server_info', 'GET /get_server_info']);
});
