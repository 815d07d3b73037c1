/**
 * One completion-token count per request (ProxiedRequest.completionTokens): the access record (and
 * so the metrics and the access log), the token clock's output-token count and the trace's
 * `gen_ai.usage.output_tokens` read the same figure, and for a resumed stream it is what the client's
 * own final `usage` says, whatever the answer's last bytes show. The real relay, stream resume,
 * journal, token clock and request trace (the SDK with an in-memory exporter), with a PassThrough
 * for each upstream body and a stand-in for the client.
 */
import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import type { Dispatcher } from 'undici';
import { ProxiedRequest } from '../../src/proxy/proxied-request.js';
import { ProxyEventBus, type RequestOutcome, type RequestRecord } from '../../src/proxy/proxy-events.js';
import { type RelayResult, relayBody } from '../../src/proxy/response-relay.js';
import type { TokenSeries } from '../../src/proxy/token-timing.js';
import { type ContextCarrier, RequestContext } from '../../src/routing/request-context.js';
import { outputText } from '../../src/sim/text-gen.js';
import { Tracing } from '../../src/tracing/tracing.js';
import { chatChunks } from '../helpers/chat-chunks.js';
import { ClientResponse } from '../helpers/client-response.js';
import { readStream } from '../helpers/stream-check.js';

const PATH = '/v1/chat/completions';

/** What the three readers of the count were told. */
interface Seen {
  record: RequestRecord | null;
  clock: number | null;
  trace: number | null;
}

/**
 * A proxied chat stream on gpu0 whose continuations come from `continuations` (on gpu1), relayed
 * to a stand-in client with a token clock and a trace; `upstream` is the first attempt's body.
 */
function proxiedStream(body: Record<string, unknown>, continuations: PassThrough[], opts: { resume?: boolean } = {}) {
  const seen: Seen = { record: null, clock: null, trace: null };
  const exporter = new InMemorySpanExporter();
  const tracing = new Tracing(
    { otlp_endpoint: 'http://127.0.0.1:9/', otlp_protocol: 'http/protobuf', sample_ratio: 1, service_name: 'test' },
    exporter,
  );
  /** What the exported server span says the output tokens were. */
  const readTrace = async () => {
    await tracing.flush();
    const server = exporter.getFinishedSpans().find((s) => s.kind === SpanKind.SERVER);
    seen.trace = (server?.attributes['gen_ai.usage.output_tokens'] as number | undefined) ?? null;
    await tracing.shutdown();
  };
  const context = new RequestContext();
  context.backend = 'gpu0';
  const json = () => body;
  const traffic = new ProxiedRequest({
    method: 'POST',
    path: PATH,
    headers: {},
    body: Buffer.from(JSON.stringify(body)),
    started: 0,
    read: { context, json, ready: null },
    tracing,
    answerPending: () => true,
  });
  traffic.sentWith({});
  let handed: RequestContext | null = null;
  const dispatcher = {
    carrying: <T>(next: RequestContext, send: () => T): T => {
      handed = next;
      return send();
    },
    request: async () => {
      const next = handed as RequestContext | null;
      assert.ok(next !== null, "the continuation's context came with its dispatch");
      next.backend = 'gpu1';
      next.dispatchedAt = 1;
      const stream = continuations.shift();
      assert.ok(stream !== undefined, 'a continuation was expected');
      return { statusCode: 200, headers: { 'content-type': 'text/event-stream' }, body: stream };
    },
  } as unknown as Pick<Dispatcher, 'request'> & ContextCarrier;
  const resume = {
    dispatcher,
    origin: 'http://fleet.invalid',
    events: new ProxyEventBus(),
    limit: opts.resume === false ? 0 : 2,
    waitMs: 5_000,
  };
  const series: TokenSeries = {
    firstToken() {},
    firstAnswer() {},
    interToken() {},
    reasoned() {},
    finished(tokens) {
      seen.clock = tokens;
    },
  };
  traffic.answerStarted(200, true, { resume, tokens: { seriesOf: () => series } });
  const client = new ClientResponse();
  const upstream = new PassThrough();
  let clock = 0;
  const ended = new Promise<RelayResult>((resolve) => {
    relayBody(upstream, client as unknown as ServerResponse, {
      sse: true,
      now: () => ++clock,
      clientStallTimeout: 0,
      reader: traffic.reader ?? undefined,
      resume: traffic.resume ?? undefined,
      tokens: traffic.tokens ?? undefined,
      ended: (result) => {
        const outcome: RequestOutcome = result.end.type === 'complete' ? 'ok' : 'upstream_error';
        seen.record = traffic.end(200, outcome, result, ++clock);
        void readTrace().then(() => resolve(result));
      },
    });
  });
  return { traffic, client, upstream, ended, seen };
}

const chat = {
  model: 'm',
  stream: true,
  max_tokens: 50,
  stream_options: { include_usage: true },
  messages: [{ role: 'user', content: 'hi' }],
};

function cut(): Error {
  return Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' });
}

test("a resumed stream: record, token clock and trace all count the client's summed usage, not the tail's", async () => {
  const continuation = new PassThrough();
  const { traffic, client, upstream, ended, seen } = proxiedStream(chat, [continuation]);
  upstream.write(chatChunks('a', 0, 3, { role: true }));
  upstream.destroy(cut());
  // The continuation sends its own usage: 4 completion tokens.
  const own = chatChunks('b', 3, 4, { role: true, finish: true });
  continuation.end(own);
  const result = await ended;

  const got = readStream(client.body);
  assert.equal(got.text, outputText(7));
  assert.equal(got.usage?.completion_tokens, 7, 'the client got the attempts summed');
  assert.equal(seen.record?.resumes, 1);
  assert.equal(seen.record?.completionTokens, 7, 'the record: what the client got');
  assert.equal(seen.clock, 7, 'the token clock: the same count');
  assert.equal(seen.trace, 7, 'the trace: the same count');
  assert.ok(result.tail !== null);
  // A tail that shows only the last attempt's own usage does not change the count of a journaled stream.
  const lastOnly = { ...result, tail: Buffer.from(own.slice(own.indexOf('data: {"id":"b","choices":[]'))) };
  assert.match(lastOnly.tail.toString(), /"completion_tokens":4/);
  assert.equal(traffic.completionTokens(lastOnly), 7);
});

test('a stream cut when its budget ran out ends with the usage the journal wrote; the count is that usage', async () => {
  const { client, upstream, ended, seen } = proxiedStream({ ...chat, max_tokens: 3 }, []);
  upstream.write(chatChunks('a', 0, 3, { role: true }));
  upstream.destroy(cut());
  await ended;
  const got = readStream(client.body);
  assert.deepEqual(got.finishReasons, ['length']);
  assert.equal(got.usage?.completion_tokens, 3);
  assert.equal(seen.record?.completionTokens, 3);
  assert.equal(seen.clock, 3);
  assert.equal(seen.trace, 3);
});

test('a resumed stream without include_usage: the count is the content events the client got, on every reader', async () => {
  const continuation = new PassThrough();
  const { client, upstream, ended, seen } = proxiedStream({ ...chat, stream_options: undefined }, [continuation]);
  upstream.write(chatChunks('a', 0, 2, { role: true }));
  upstream.destroy(cut());
  // Without include_usage the engine sends no usage event: the last chunks, then [DONE].
  continuation.end(`${chatChunks('b', 2, 3, { role: true })}data: [DONE]\n\n`);
  await ended;
  const got = readStream(client.body);
  assert.equal(got.usage, null);
  assert.equal(got.text, outputText(5));
  assert.equal(seen.record?.completionTokens, 5);
  assert.equal(seen.clock, 5);
  assert.equal(seen.trace, 5);
});

test('a stream with no journal: its usage when it sent one, else its content events; an answer with neither: null', async () => {
  const withUsage = proxiedStream(chat, [], { resume: false });
  withUsage.upstream.end(chatChunks('a', 0, 4, { role: true, finish: true }));
  await withUsage.ended;
  assert.equal(withUsage.traffic.resume, null);
  assert.deepEqual(withUsage.seen, { record: withUsage.seen.record, clock: 4, trace: 4 });
  assert.equal(withUsage.seen.record?.completionTokens, 4);

  const without = proxiedStream(chat, [], { resume: false });
  without.upstream.end(`${chatChunks('a', 0, 2, { role: true })}data: [DONE]\n\n`);
  await without.ended;
  assert.equal(without.seen.record?.completionTokens, 2);
  assert.equal(without.seen.clock, 2);

  const plain = new ProxiedRequest({
    method: 'POST',
    path: '/v1/embeddings',
    headers: {},
    body: null,
    started: 0,
    read: { context: new RequestContext(), json: () => undefined, ready: null },
    tracing: null,
    answerPending: () => true,
  });
  const answer: RelayResult = { end: { type: 'complete' }, bytes: 9, firstByteAt: 1, tail: Buffer.from('{"data":[]}') };
  assert.equal(plain.completionTokens(answer), null);
  assert.equal(plain.end(200, 'ok', answer, 2).completionTokens, null);
});
