/**
 * One proxied request, from its admission to its access record: the one owner of what the traffic
 * path knows of it, and the one that acts on it. It holds its dispatch context (routing reads that,
 * and only that: class and key, model queue, trace, the backend and retries the dispatcher writes
 * back), its body as JSON as sent upstream (parsed at most once, request-context-from.ts), the
 * upstream headers; when its answer starts it makes, in one call, the answer's one reader
 * (stream-journal.ts), the stream's resume and the token clock; and it writes the record its ending
 * emits, with the one count of the completion tokens the client got (`completionTokens`). Its
 * fields are read from outside and changed only through its methods.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { type ContextCarrier, RequestContext } from '../routing/request-context.js';
import type { Tracing } from '../tracing/tracing.js';
import { completionTokensIn } from './answer-tail.js';
import type { RequestHeaders } from './headers.js';
import type { RequestOutcome, RequestRecord } from './proxy-events.js';
import type { ContextRefusal, ReadRequest } from './request-context-from.js';
import { RequestSpan } from './request-trace.js';
import type { RelayResult } from './response-relay.js';
import { streamShapeOf } from './sse-event.js';
import { StreamJournal } from './stream-journal.js';
import { type ResumeSettings, StreamResume } from './stream-resume.js';
import { TokenClock, type TokenObserver } from './token-timing.js';

declare module 'fastify' {
  interface FastifyRequest {
    traffic: ProxiedRequest | null;
  }
}

/** What a request arriving on the traffic path is, as the route's handler reads it. */
export interface Arrival {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The buffered body; null: none. */
  body: Buffer | null;
  /** performance.now() at admission. */
  started: number;
  /** Its context and body's JSON, or why it is refused (request-context-from.ts). */
  read: ReadRequest | ContextRefusal;
  /** `tracing`, when on: the request gets its server span. */
  tracing: Tracing | null;
  /** Whether the client's connection is still waiting for the answer to be written. */
  answerPending: () => boolean;
}

/** What makes an answer's parts: resume's settings (limit 0: off), and the token clock's observer. */
export interface AnswerParts {
  readonly resume: ResumeSettings;
  readonly tokens: TokenObserver | null;
}

/** `off`: the client's stream is not continued after a cut (docs/stream-resume.md). */
export const RESUME_HEADER = 'x-fleetgate-resume';

export class ProxiedRequest {
  readonly context: RequestContext;
  readonly method: string;
  readonly path: string;
  /** performance.now() at admission; the dispatcher stamps `dispatchedAt` on the same clock. */
  readonly started: number;
  /** Why it is answered at once without reaching a backend; null: admitted. */
  readonly refusal: ContextRefusal | null;
  /** Aborts the dispatch when the client's connection closes before the answer is written. */
  readonly onClientClose: () => void;
  /** Settles when its context is whole (kv-aware's keys waiting for the tokenizer); null: it is. */
  readonly ready: Promise<void> | null;
  readonly #resumable: boolean;
  #sent: (() => unknown) | null = null;
  #upstreamHeaders: RequestHeaders | null = null;
  #sse = false;
  #reader: StreamJournal | null = null;
  #resume: StreamResume | null = null;
  #tokens: TokenClock | null = null;

  constructor(arrival: Arrival) {
    const { read } = arrival;
    this.refusal = 'status' in read ? read : null;
    this.ready = 'status' in read ? null : read.ready;
    // A refused request gets a context of its own: nothing is shared between requests.
    this.context = 'status' in read ? new RequestContext() : read.context;
    this.method = arrival.method;
    this.path = arrival.path;
    this.started = arrival.started;
    this.#resumable = arrival.headers[RESUME_HEADER] !== 'off';
    const context = this.context;
    this.onClientClose = () => {
      if (arrival.answerPending()) context.clientGone.abort();
    };
    if (arrival.tracing !== null) {
      const trace = new RequestSpan(arrival.tracing, this.method, this.path, arrival.headers, this.started);
      context.trace = trace;
      if (arrival.body !== null && this.refusal === null) trace.describe(arrival.body);
    }
    if (!('status' in read)) this.#sent = read.json;
  }

  /** Its trace (`tracing` on), the one its context carries for dispatch and resume. */
  get trace(): RequestSpan | null {
    return this.context.trace as RequestSpan | null;
  }

  /** The body as sent upstream, as JSON (the class's `priority` stamped in); null: no body. */
  get sent(): (() => unknown) | null {
    return this.#sent;
  }

  /** The answer is an SSE stream. */
  get sse(): boolean {
    return this.#sse;
  }

  get resume(): StreamResume | null {
    return this.#resume;
  }

  /** Its SSE answer's one reader; null for what is no generation's stream. */
  get reader(): StreamJournal | null {
    return this.#reader;
  }

  /** Times its generated tokens (token-timing.ts); null for what is no generation's answer. */
  get tokens(): TokenClock | null {
    return this.#tokens;
  }

  /** The body goes upstream rewritten (the class's `priority` stamped in): `json` is what was sent. */
  sendsRewritten(json: unknown): void {
    this.#sent = () => json;
  }

  /** Sends the request through the fleet (`send` makes its one dispatch): its routing ticket goes with it. */
  sendThrough<T>(fleet: ContextCarrier, send: () => T): T {
    return fleet.carrying(this.context, send);
  }

  /** The headers as sent upstream: a stream's continuation is sent with them. */
  sentWith(headers: RequestHeaders): void {
    this.#upstreamHeaders = headers;
  }

  /**
   * The answer's status and headers arrived (`sse`: an event stream): a generation's (a POST answered
   * 200) gets its token clock when an observer listens, an SSE one its reader, and a streamed chat or
   * completions answer its resume unless resume is off for it.
   */
  answerStarted(status: number, sse: boolean, parts: AnswerParts): void {
    this.#sse = sse;
    const generated = status === 200 && this.method === 'POST';
    const backend = this.context.backend;
    if (generated && parts.tokens !== null && backend !== null)
      this.#tokens = new TokenClock(parts.tokens, backend, sse, this.started);
    if (!sse || !generated) return;
    const shape = streamShapeOf(this.path);
    const api = shape.api;
    const sent = this.#sent;
    const headers = this.#upstreamHeaders;
    const resumable = api !== null && parts.resume.limit > 0 && this.#resumable && sent !== null && headers !== null;
    this.#reader = new StreamJournal(shape, resumable);
    if (!resumable) return;
    const request = { api, path: this.path, json: sent, headers, context: this.context };
    this.#resume = new StreamResume(parts.resume, request, this.#reader);
  }

  /**
   * The request ended at `endedAt` with `status` and `outcome` (`relay`: when a body was relayed):
   * its token clock and trace end with it, and its access record, for the bus, is returned. All three
   * read the one count of its completion tokens (`completionTokens`).
   */
  end(status: number, outcome: RequestOutcome, relay: RelayResult | null, endedAt: number): RequestRecord {
    const tokens = this.completionTokens(relay);
    if (outcome === 'ok' && relay !== null) this.#tokens?.finished(endedAt, tokens);
    const entry = this.#recordOf(status, outcome, relay, endedAt, tokens);
    this.#endTrace(entry, relay, endedAt);
    return entry;
  }

  /**
   * How many completion tokens the client got. A resumable stream's journal counts them across its
   * attempts (each attempt's own `usage` where it sent one, else its content events): the figure the
   * client's final `usage` shows, which the answer's last bytes need not (a stream ended on its
   * budget at a cut). Otherwise the answer's own `usage` (its tail), else the content events its
   * reader saw; null when nothing tells.
   */
  completionTokens(relay: RelayResult | null): number | null {
    if (this.#resume !== null) return this.#resume.tokens;
    const reported = relay === null ? null : completionTokensIn(relay.tail);
    if (reported !== null) return reported;
    const events = this.#reader?.tokens ?? 0;
    return events > 0 ? events : null;
  }

  #recordOf(
    status: number,
    outcome: RequestOutcome,
    relay: RelayResult | null,
    endedAt: number,
    completionTokens: number | null,
  ): RequestRecord {
    const context = this.context;
    return {
      backend: context.backend,
      method: this.method,
      path: this.path,
      status,
      durationMs: endedAt - this.started,
      ttfbMs: relay?.firstByteAt != null ? relay.firstByteAt - this.started : null,
      priorityClass: context.traits?.priority ?? null,
      queueMs: context.dispatchedAt !== null ? context.dispatchedAt - this.started : null,
      bytes: relay?.bytes ?? 0,
      retries: context.retries,
      resumes: this.#resume?.count ?? 0,
      backends: this.#resume?.backends ?? [],
      outcome,
      completionTokens,
      streamed: this.#sse,
    };
  }

  /** Ends its trace (when tracing is on) with the record and what the answer's last events say. */
  #endTrace(entry: RequestRecord, relay: RelayResult | null, endedAt: number): void {
    const trace = this.trace;
    if (trace === null) return;
    const firstAt = this.#tokens?.firstTokenAt ?? null;
    const ttftSeconds = firstAt !== null ? (firstAt - this.started) / 1000 : null;
    trace.end(entry, { tail: relay?.tail ?? null, ttftSeconds }, endedAt);
  }
}
