/**
 * One proxied request's spans (docs/operations.md, "Traces"), built only while tracing is on: the
 * server span (continuing an incoming `traceparent`), the wait in the queue, one client span per
 * upstream attempt (whose `traceparent` the attempt carries) and one per stream resume. The
 * attributes follow OpenTelemetry's GenAI semantic conventions where one exists, else `fleetgate.*`.
 * A request the sampler leaves out still hands its trace on upstream, but reads nothing of its body
 * or answer for attributes no one records: a `sample_ratio` below 1 saves that work too.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { type Attributes, type Context, type Span, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import {
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_URL_PATH,
} from '@opentelemetry/semantic-conventions';
import { topLevelFields } from '../http/top-level-fields.js';
import type { AttemptTrace, RequestTrace } from '../routing/request-context.js';
import { GEN_AI } from '../tracing/gen-ai-attributes.js';
import type { Tracing } from '../tracing/tracing.js';
import { finishReasonIn, promptTokensIn } from './answer-tail.js';
import { apiOf } from './continuation.js';
import type { RequestRecord } from './proxy-events.js';

/** The body's top-level fields `describe` reads. */
const DESCRIBED: ReadonlySet<string> = new Set([
  'model',
  'max_tokens',
  'max_completion_tokens',
  'temperature',
  'stream',
]);

/** What the end of a request adds to its span beyond its access record. */
export interface AnswerFacts {
  /** The answer's last bytes (the relay's `tail`), where its usage and finish reason are. */
  tail: Buffer | null;
  /** Seconds to the first token, when one was timed. */
  ttftSeconds: number | null;
}

class AttemptSpan implements AttemptTrace {
  readonly headers: Record<string, string>;
  readonly #span: Span;
  #ended = false;

  constructor(tracing: Tracing, parent: Context, backend: string, retry: number, name: string) {
    this.#span = tracing.start(name, parent, {
      kind: SpanKind.CLIENT,
      attributes: { 'fleetgate.backend': backend, 'fleetgate.retry': retry },
    });
    this.headers = tracing.headersOf(this.#span);
  }

  responded(status: number): void {
    this.#span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
  }

  ended(failure: string | null): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#span.setAttribute('fleetgate.outcome', failure ?? 'ok');
    if (failure !== null) this.#span.setStatus({ code: SpanStatusCode.ERROR, message: failure });
    this.#span.end();
  }
}

export class RequestSpan implements RequestTrace {
  readonly #tracing: Tracing;
  readonly #span: Span;
  /** The sampler kept it: only then are attributes worth reading. */
  readonly recording: boolean;
  /** The context of its children's spans, made once. */
  readonly #children: Context;
  /** The name of its attempts' spans. */
  readonly #attemptName: string;
  /** Its latest attempt: the one a stream's cut ends. */
  #attempt: AttemptSpan | null = null;

  constructor(tracing: Tracing, method: string, path: string, headers: IncomingHttpHeaders, startedAt: number) {
    this.#tracing = tracing;
    this.#attemptName = `${method} ${path}`;
    const api = apiOf(path);
    const attributes: Attributes = { [ATTR_HTTP_REQUEST_METHOD]: method, [ATTR_URL_PATH]: path };
    if (api !== null) attributes[GEN_AI.operation] = api === 'chat' ? 'chat' : 'text_completion';
    this.#span = tracing.start(`${method} ${path}`, tracing.extract(headers), {
      kind: SpanKind.SERVER,
      attributes,
      startTime: startedAt,
    });
    this.recording = this.#span.isRecording();
    this.#children = tracing.contextOf(this.#span);
  }

  /** The request's body (JSON): the GenAI request attributes its top-level fields name. */
  describe(body: Buffer): void {
    if (!this.recording) return;
    const b = topLevelFields(body, DESCRIBED);
    const attributes: Attributes = {};
    const model = b.get('model');
    if (typeof model === 'string') attributes[GEN_AI.requestModel] = model;
    const maxTokens = b.get('max_tokens');
    const max = typeof maxTokens === 'number' ? maxTokens : b.get('max_completion_tokens');
    if (typeof max === 'number') attributes[GEN_AI.maxTokens] = max;
    const temperature = b.get('temperature');
    if (typeof temperature === 'number') attributes[GEN_AI.temperature] = temperature;
    const stream = b.get('stream');
    if (typeof stream === 'boolean') attributes[GEN_AI.stream] = stream;
    this.#span.setAttributes(attributes);
  }

  queued(from: number, to: number): void {
    this.#tracing.start('fleetgate.queue', this.#children, { kind: SpanKind.INTERNAL, startTime: from }).end(to);
  }

  attempt(backend: string, retry: number): AttemptTrace {
    this.#attempt = new AttemptSpan(this.#tracing, this.#children, backend, retry, this.#attemptName);
    return this.#attempt;
  }

  cut(failure: string): void {
    this.#attempt?.ended(failure);
  }

  resumed(from: string, to: string | null, reason: string, startedAt: number): void {
    const attributes: Attributes = { 'fleetgate.resume.from': from, 'fleetgate.resume.reason': reason };
    if (to !== null) attributes['fleetgate.resume.to'] = to;
    const span = this.#tracing.start('fleetgate.resume', this.#children, {
      kind: SpanKind.INTERNAL,
      attributes,
      startTime: startedAt,
    });
    if (to === null) span.setStatus({ code: SpanStatusCode.ERROR, message: 'not resumed' });
    span.end();
  }

  /** The request is over: its access record and what its answer said. */
  end(record: RequestRecord, answer: AnswerFacts, endedAt: number): void {
    const span = this.#span;
    if (!this.recording) {
      span.end(endedAt);
      return;
    }
    const attributes: Attributes = {
      [ATTR_HTTP_RESPONSE_STATUS_CODE]: record.status,
      'fleetgate.outcome': record.outcome,
      'fleetgate.retries': record.retries,
      'fleetgate.resumed': record.resumes > 0,
    };
    if (record.backend !== null) attributes['fleetgate.backend'] = record.backend;
    if (record.priorityClass !== null) attributes['fleetgate.priority_class'] = record.priorityClass;
    if (record.backends.length > 1) attributes['fleetgate.backends'] = [...record.backends];
    const inputTokens = promptTokensIn(answer.tail);
    if (inputTokens !== null) attributes[GEN_AI.inputTokens] = inputTokens;
    if (record.completionTokens !== null) attributes[GEN_AI.outputTokens] = record.completionTokens;
    const finishReason = finishReasonIn(answer.tail);
    if (finishReason !== null) attributes[GEN_AI.finishReasons] = [finishReason];
    if (answer.ttftSeconds !== null) attributes[GEN_AI.ttft] = answer.ttftSeconds;
    span.setAttributes(attributes);
    if (record.status >= 500 || record.outcome === 'upstream_error') span.setStatus({ code: SpanStatusCode.ERROR });
    span.end(endedAt);
  }
}
