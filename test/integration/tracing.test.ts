/**
 * OpenTelemetry traces over real TCP (docs/operations.md, "Traces"): fleetgate exports to an
 * OTLP/HTTP receiver the test runs, which decodes http/protobuf with OpenTelemetry's generated
 * protobuf code and http/json as OTLP's JSON mapping (helpers/otlp-collector.ts). A streamed request
 * with an incoming `traceparent` keeps its trace id; the upstream request carries a `traceparent`
 * naming the attempt's span; the server, queue and attempt spans carry their attributes (GenAI
 * conventions and fleetgate's); a retried request and a resumed stream show one span per attempt; a
 * Batch API job has a span with one span per request, which the proxied request continues.
 * Off by default: nothing is added to an upstream request.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { SpanKind } from '@opentelemetry/api';
import { DEFAULT_TRACING_PROTOCOL } from '../../src/config/defaults.js';
import { Tracing } from '../../src/tracing/tracing.js';
import { tempDir, writeChatInput } from '../helpers/batch.js';
import { createSims, startGateway } from '../helpers/fleet.js';
import { type Collector, type ReceivedSpan, startCollector, startHeaderTap } from '../helpers/otlp-collector.js';
import { chunk, rawPair, resumeFleet, sseThenClose } from '../helpers/resume-fleet.js';
import { startSimProcess } from '../helpers/sim-process.js';
import { assertWholeStream } from '../helpers/stream-check.js';
import { streamFrom } from '../helpers/streamed-request.js';
import { waitFor } from '../helpers/wait.js';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_ID = '00f067aa0ba902b7';
const SERVER = 2;
const CLIENT = 3;

const tracingTo = (collector: Collector, protocol = 'http/json') => ({
  otlp_endpoint: collector.url,
  otlp_protocol: protocol,
  service_name: 'fleetgate-test',
});

const chat = (maxTokens: number) => ({
  model: 'default',
  stream: true,
  max_tokens: maxTokens,
  temperature: 0.5,
  stream_options: { include_usage: true },
  messages: [{ role: 'user', content: 'Tell me about Paris' }],
});

function inTrace(collector: Collector, traceId: string): ReceivedSpan[] {
  return collector.spans.filter((s) => s.traceId === traceId);
}

async function spansOf(
  collector: Collector,
  traceId: string,
  what: string,
  enough: (spans: ReceivedSpan[]) => boolean,
) {
  await waitFor(() => enough(inTrace(collector, traceId)), { what, timeoutMs: 20_000 });
  return inTrace(collector, traceId);
}

for (const protocol of ['http/protobuf', 'http/json']) {
  test(`${protocol}: a streamed request with a traceparent: trace kept, upstream traceparent names the attempt span, spans with attributes`, async (t) => {
    const collector = await startCollector(t);
    const [sim] = await createSims(t, [{ engine: { tokenMs: 10 } }]);
    sim.start();
    await sim.whenReady();
    const tap = await startHeaderTap(t, sim.url);
    const { gateway, url } = await startGateway(t, {
      backends: [{ url: tap.url, name: 'gpu0' }],
      routing: { max_inflight_per_backend: 1 },
      tracing: tracingTo(collector, protocol),
    });
    await waitFor(() => gateway.fleet.registry.ready.length === 1, { what: 'gpu0 ready' });

    // The first request holds the one slot, so the traced one waits in the queue.
    const first = streamFrom(url, '/v1/chat/completions', chat(30));
    await first.atTokens(1);
    const traced = streamFrom(url, '/v1/chat/completions', chat(20), {
      traceparent: `00-${TRACE_ID}-${PARENT_ID}-01`,
      'x-fleetgate-priority': 'interactive',
    });
    const got = await traced.done;
    assertWholeStream(got, 20);
    await first.done;
    await gateway.close();

    const spans = await spansOf(collector, TRACE_ID, 'server, queue and attempt spans', (s) => s.length >= 3);
    const server = spans.find((s) => s.kind === SERVER);
    assert.ok(server, 'a server span');
    assert.equal(server.parentSpanId, PARENT_ID, 'the incoming span is its parent');
    assert.equal(server.service, 'fleetgate-test');
    assert.equal(server.name, 'POST /v1/chat/completions');
    assert.equal(server.attributes['gen_ai.operation.name'], 'chat');
    assert.equal(server.attributes['gen_ai.request.model'], 'default');
    assert.equal(server.attributes['gen_ai.request.max_tokens'], 20);
    assert.equal(server.attributes['gen_ai.request.temperature'], 0.5);
    assert.equal(server.attributes['gen_ai.request.stream'], true);
    assert.equal(server.attributes['gen_ai.usage.output_tokens'], 20);
    assert.equal(server.attributes['gen_ai.usage.input_tokens'], got.usage?.prompt_tokens);
    assert.deepEqual(server.attributes['gen_ai.response.finish_reasons'], ['length']);
    assert.equal(typeof server.attributes['gen_ai.server.time_to_first_token'], 'number');
    assert.equal(server.attributes['http.response.status_code'], 200);
    assert.equal(server.attributes['fleetgate.backend'], 'gpu0');
    assert.equal(server.attributes['fleetgate.priority_class'], 'interactive');
    assert.equal(server.attributes['fleetgate.resumed'], false);

    const queue = spans.find((s) => s.name === 'fleetgate.queue');
    assert.ok(queue, 'a queue span');
    assert.equal(queue.parentSpanId, server.spanId);
    assert.ok(queue.endMs - queue.startMs > 50, `it waited ${queue.endMs - queue.startMs} ms for the slot`);

    const attempts = spans.filter((s) => s.kind === CLIENT);
    assert.equal(attempts.length, 1, 'one attempt');
    const [attempt] = attempts;
    assert.equal(attempt.parentSpanId, server.spanId);
    assert.equal(attempt.attributes['fleetgate.backend'], 'gpu0');
    assert.equal(attempt.attributes['fleetgate.retry'], 0);
    assert.equal(attempt.attributes['fleetgate.outcome'], 'ok');
    assert.equal(attempt.attributes['http.response.status_code'], 200);
    assert.ok(attempt.startMs >= queue.endMs - 1, 'the attempt starts when the wait ends');

    const upstream = tap.posts.map((p) => p.headers.traceparent);
    assert.equal(upstream.length, 2);
    assert.equal(upstream[1], `00-${TRACE_ID}-${attempt.spanId}-01`, "the upstream traceparent is the attempt's");
    // The untraced first request got a trace of its own (sample_ratio 1).
    assert.match(String(upstream[0]), /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    assert.ok(!String(upstream[0]).includes(TRACE_ID));
    // The first request was leased at once: its trace has a server span but no queue span.
    const firstTrace = String(upstream[0]).split('-')[1];
    const firstSpans = await spansOf(collector, firstTrace, "the first request's server span", (s) =>
      s.some((x) => x.kind === SERVER),
    );
    assert.equal(firstSpans.filter((s) => s.name === 'fleetgate.queue').length, 0, 'no queue span without a wait');
    const contentType = protocol === 'http/json' ? 'application/json' : 'application/x-protobuf';
    assert.ok(
      collector.exports.every((e) => e.contentType === contentType),
      `every export is ${contentType}`,
    );
  });
}

test('a retried request: one attempt span per attempt, each upstream request with its own traceparent', async (t) => {
  const collector = await startCollector(t);
  const sims = await createSims(t, [{ engine: { tokenMs: 2 } }, { engine: { tokenMs: 2 } }]);
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady()));
  const faults = { resetNext: false };
  const taps = await Promise.all(sims.map((sim) => startHeaderTap(t, sim.url, faults)));
  const { gateway, url } = await startGateway(t, {
    backends: taps.map((tap, i) => ({ url: tap.url, name: `gpu${i}` })),
    tracing: tracingTo(collector),
  });
  await waitFor(() => gateway.fleet.registry.ready.length === 2, { what: 'both ready' });
  faults.resetNext = true;
  const got = await streamFrom(url, '/v1/chat/completions', chat(10), {
    traceparent: `00-${TRACE_ID}-${PARENT_ID}-01`,
  }).done;
  assertWholeStream(got, 10);
  await gateway.close();

  const spans = await spansOf(
    collector,
    TRACE_ID,
    'two attempt spans',
    (s) => s.filter((x) => x.kind === CLIENT).length >= 2,
  );
  const server = spans.find((s) => s.kind === SERVER) as ReceivedSpan;
  assert.equal(server.attributes['fleetgate.retries'], 1);
  const attempts = spans.filter((s) => s.kind === CLIENT).sort((a, b) => a.startMs - b.startMs);
  assert.equal(attempts.length, 2, 'one span per attempt');
  assert.deepEqual(
    attempts.map((a) => [a.attributes['fleetgate.retry'], a.attributes['fleetgate.outcome']]),
    [
      [0, 'reset'],
      [1, 'ok'],
    ],
  );
  assert.notEqual(attempts[0].attributes['fleetgate.backend'], attempts[1].attributes['fleetgate.backend']);
  assert.equal(attempts[0].statusCode, 2, 'the failed attempt is an error');
  const passed = taps.flatMap((tap) => tap.posts).map((p) => p.headers.traceparent);
  assert.deepEqual(
    passed,
    [`00-${TRACE_ID}-${attempts[1].spanId}-01`],
    'the one that reached a backend names its span',
  );
});

test('a stream resumed after a SIGKILL: one attempt span per backend and a resume span', async (t) => {
  const collector = await startCollector(t);
  const dying = await startSimProcess(t, 'gpu0', ['--token-ms', '40']);
  const fleet = await resumeFleet(t, dying, { tracing: tracingTo(collector) });
  const stream = streamFrom(fleet.url, '/v1/chat/completions', chat(60), {
    traceparent: `00-${TRACE_ID}-${PARENT_ID}-01`,
  });
  await stream.atTokens(5);
  await fleet.admitSpare();
  await dying.kill();
  const got = await stream.done;
  assertWholeStream(got, 60);
  await fleet.gateway.close();

  const spans = await spansOf(collector, TRACE_ID, 'the resume span', (s) =>
    s.some((x) => x.name === 'fleetgate.resume'),
  );
  const server = spans.find((s) => s.kind === SERVER) as ReceivedSpan;
  assert.equal(server.attributes['fleetgate.resumed'], true);
  assert.deepEqual(server.attributes['fleetgate.backends'], ['gpu0', 'gpu1']);
  assert.equal(server.attributes['gen_ai.usage.output_tokens'], 60);
  const attempts = spans.filter((s) => s.kind === CLIENT).sort((a, b) => a.startMs - b.startMs);
  assert.deepEqual(
    attempts.map((a) => [a.attributes['fleetgate.backend'], a.attributes['fleetgate.outcome']]),
    [
      ['gpu0', 'reset'],
      ['gpu1', 'ok'],
    ],
  );
  const resume = spans.find((s) => s.name === 'fleetgate.resume') as ReceivedSpan;
  assert.equal(resume.parentSpanId, server.spanId);
  assert.equal(resume.attributes['fleetgate.resume.from'], 'gpu0');
  assert.equal(resume.attributes['fleetgate.resume.to'], 'gpu1');
  assert.equal(resume.attributes['fleetgate.resume.reason'], 'reset');
  for (const attempt of attempts) assert.equal(attempt.parentSpanId, server.spanId);
});

test('a stream cut by an error event, then closed before [DONE]: the attempts and resumes say which', async (t) => {
  const collector = await startCollector(t);
  const { url, gateway } = await rawPair(
    t,
    (socket, n) => {
      const text = [chunk('x', { role: 'assistant', content: '' }), chunk('x', { content: 'ABC'[n] })];
      if (n === 0) sseThenClose(socket, text, 'data: {"error":{"message":"oom"}}\n\n');
      else if (n === 1) sseThenClose(socket, text);
      else sseThenClose(socket, [...text, chunk('x', {}, 'stop')], 'data: [DONE]\n\n');
    },
    { tracing: tracingTo(collector) },
  );
  const got = await streamFrom(url, '/v1/chat/completions', chat(10), {
    traceparent: `00-${TRACE_ID}-${PARENT_ID}-01`,
  }).done;
  assert.equal(got.text, 'ABC');
  await gateway.close();
  const spans = await spansOf(
    collector,
    TRACE_ID,
    'three attempt spans and two resumes',
    (s) =>
      s.filter((x) => x.kind === CLIENT).length === 3 && s.filter((x) => x.name === 'fleetgate.resume').length === 2,
  );
  const inOrder = (list: ReceivedSpan[]) => list.sort((x, y) => x.startMs - y.startMs);
  // The error event ends its attempt (not the client, which stayed); an answer whose HTTP exchange
  // completed is `ok` even without `[DONE]`: its resume span says `closed`.
  assert.deepEqual(
    inOrder(spans.filter((x) => x.kind === CLIENT)).map((x) => x.attributes['fleetgate.outcome']),
    ['error_event', 'ok', 'ok'],
  );
  assert.deepEqual(
    inOrder(spans.filter((x) => x.name === 'fleetgate.resume')).map((x) => x.attributes['fleetgate.resume.reason']),
    ['error_event', 'closed'],
  );
});

test('http/protobuf (the default) exports protobuf; tracing off (the default) adds no traceparent upstream', async (t) => {
  const collector = await startCollector(t);
  const [sim] = await createSims(t, [{ engine: { tokenMs: 1 } }]);
  sim.start();
  await sim.whenReady();
  const tap = await startHeaderTap(t, sim.url);
  const on = await startGateway(t, {
    backends: [{ url: tap.url, name: 'gpu0' }],
    tracing: { otlp_endpoint: `${collector.url}/v1/traces` },
  });
  const off = await startGateway(t, { backends: [{ url: tap.url, name: 'gpu0' }] });
  await waitFor(() => on.gateway.fleet.registry.ready.length === 1 && off.gateway.fleet.registry.ready.length === 1, {
    what: 'both gateways ready',
  });
  await streamFrom(on.url, '/v1/chat/completions', chat(3), { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` }).done;
  await streamFrom(off.url, '/v1/chat/completions', chat(3)).done;
  await on.gateway.close();
  const spans = await spansOf(collector, TRACE_ID, 'the server and attempt spans', (s) => s.length >= 2);
  assert.ok(collector.exports.every((e) => e.contentType === 'application/x-protobuf'));
  const server = spans.find((s) => s.kind === SERVER) as ReceivedSpan;
  assert.equal(server.service, 'fleetgate', 'the default service name');
  assert.ok(!spans.some((s) => s.name === 'fleetgate.queue'), 'leased at once: no queue span');
  assert.equal(server.attributes['gen_ai.usage.output_tokens'], 3);
  assert.equal(tap.posts.length, 2);
  assert.match(String(tap.posts[0].headers.traceparent), new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-01$`));
  assert.equal(tap.posts[1].headers.traceparent, undefined, 'off: nothing added');
});

test('a Batch API job: a span per job, a span per request under it, and each proxied request a child of its request span', async (t) => {
  const collector = await startCollector(t);
  const dir = tempDir(t);
  const count = 5;
  const input = writeChatInput(dir, count, 3);
  const [sim] = await createSims(t, [{ engine: { tokenMs: 1 } }]);
  sim.start();
  await sim.whenReady();
  const { gateway, url } = await startGateway(t, {
    backends: [{ url: sim.url, name: 'gpu0' }],
    batch: { dir: join(dir, 'batches') },
    tracing: tracingTo(collector),
  });
  await waitFor(() => gateway.fleet.registry.ready.length === 1, { what: 'gpu0 ready' });
  const form = new FormData();
  form.append('purpose', 'batch');
  form.append('file', new Blob([readFileSync(input)]), 'input.jsonl');
  const file = (await (await fetch(`${url}/v1/files`, { method: 'POST', body: form })).json()) as { id: string };
  const created = (await (
    await fetch(`${url}/v1/batches`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }),
    })
  ).json()) as { id: string };
  await waitFor(
    async () =>
      ((await (await fetch(`${url}/v1/batches/${created.id}`)).json()) as { status: string }).status === 'completed',
    { what: 'the job completed' },
  );
  await gateway.close();

  await waitFor(() => collector.spans.some((s) => s.name === 'fleetgate.batch'), { what: 'the job span' });
  const job = collector.spans.find((s) => s.name === 'fleetgate.batch') as ReceivedSpan;
  assert.equal(job.attributes['fleetgate.batch.id'], created.id);
  assert.equal(job.attributes['fleetgate.batch.status'], 'completed');
  assert.equal(job.attributes['fleetgate.batch.requests.completed'], count);
  const spans = inTrace(collector, job.traceId);
  const requests = spans.filter((s) => s.name === 'fleetgate.batch.request');
  assert.equal(requests.length, count, 'one span per request');
  for (const span of requests) {
    assert.equal(span.parentSpanId, job.spanId);
    assert.equal(span.attributes['fleetgate.outcome'], 'answer');
    const server = spans.filter((s) => s.kind === SERVER && s.parentSpanId === span.spanId);
    assert.equal(server.length, 1, 'the proxied request continues the request span');
    assert.equal(server[0].attributes['gen_ai.usage.output_tokens'], 3);
    assert.equal(spans.filter((s) => s.kind === CLIENT && s.parentSpanId === server[0].spanId).length, 1);
  }
  assert.deepEqual(
    [...new Set(requests.map((s) => s.attributes['fleetgate.batch.custom_id']))].length,
    count,
    'each custom_id once',
  );
});

test('a shutdown with a full queue of ended spans exports every one of them (one export per batch, all at once)', async (t) => {
  const collector = await startCollector(t);
  const tracing = new Tracing({
    otlp_endpoint: collector.url,
    otlp_protocol: DEFAULT_TRACING_PROTOCOL,
    sample_ratio: 1,
    service_name: 'fleetgate-test',
  });
  // The processor's whole queue ended in one tick: its first batch is being sent when the
  // shutdown exports the other 31 at once.
  for (let i = 0; i < 2048; i++) tracing.start(`span ${i}`, null, { kind: SpanKind.INTERNAL }).end();
  await tracing.shutdown();
  assert.equal(new Set(collector.spans.map((s) => s.name)).size, 2048);
});
