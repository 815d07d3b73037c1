/**
 * @fastify/reply-from's callbacks for the traffic path, and each request's access record: the
 * request's headers on their way upstream (`rewriteRequestHeaders`), the response's status and
 * headers then its body relayed by response-relay.ts (`onResponse`), and the answer to a request
 * that got no response (`onError`: a queue refusal from routing/dispatch/admission-refusals.ts, else an
 * upstream failure from routing/dispatch/upstream-failures.ts). Every ending emits one `request` record.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type ErrorType, errorTypeFor, sendError } from '../http/openai-error.js';
import { admissionRefusal } from '../routing/dispatch/admission-refusals.js';
import type { FleetDispatcher } from '../routing/dispatch/fleet-dispatcher.js';
import { classifyUpstreamError } from '../routing/dispatch/upstream-failures.js';
import { AdmissionError } from '../routing/queue/wait-queue.js';
import { attachContext, type RequestContext } from '../routing/request-context.js';
import { unwatchConnection } from './client-gone.js';
import { apiOf } from './continuation.js';
import { clientResponseHeaders, type RequestHeaders, upstreamRequestHeaders } from './headers.js';
import type { ProxyEventBus, RequestOutcome, RequestRecord } from './proxy-events.js';
import type { RequestSpan } from './request-trace.js';
import { completionTokensIn, finishReasonIn, promptTokensIn, type RelayResult, relayBody } from './response-relay.js';
import { type ResumeSettings, StreamResume } from './stream-resume.js';
import { CHAT_CONTENT, TEXT_CONTENT, TokenClock } from './token-timing.js';

/** What the proxy keeps per request: the context the dispatcher reads, and what the access record needs. */
export interface Traffic {
  readonly context: RequestContext;
  readonly started: number;
  readonly onClientClose: () => void;
  sse: boolean;
  /**
   * The body as sent upstream, as JSON (request-context-from.ts `BodyJson`: parsed once, shared
   * with admission), and the headers: a stream's continuation is built from them. Null: no body.
   */
  sent: (() => unknown) | null;
  upstreamHeaders: RequestHeaders | null;
  resume: StreamResume | null;
  /** Its spans, while tracing is on. */
  trace: RequestSpan | null;
  /** Times its generated tokens (token-timing.ts); null for what is no generation's answer. */
  tokens: TokenClock | null;
}

declare module 'fastify' {
  interface FastifyRequest {
    traffic: Traffic | null;
  }
}

/** `off`: the client's stream is not continued after a cut (docs/stream-resume.md). */
const RESUME_HEADER = 'x-fleetgate-resume';

/** Not a real host: the fleet dispatcher picks the backend and ignores the origin. */
export const FLEET_ORIGIN = 'http://fleet.invalid';

export interface ReplyCallbackOptions {
  dispatcher: FleetDispatcher;
  events: ProxyEventBus;
  /** Seconds, for `Retry-After` on a 503 or 429. */
  retryAfterSeconds: number;
  /** `upstream.api_key`, sent upstream in place of the client's. */
  upstreamApiKey: string | null;
  /** `upstream.stream_idle_timeout` (ms): a client that reads nothing this long is cut. */
  clientStallTimeout: number;
  /** `retry.resume_limit` and `retry.resume_wait`. */
  resumeLimit: number;
  resumeWaitMs: number;
  /** The clock `Traffic.started` is read on; the dispatcher stamps `dispatchedAt` with the same one. */
  now: () => number;
}

export interface ReplyCallbacks {
  /** reply-from's options for the traffic routes. */
  replyOptions: object;
  /** Answers a request that never reaches the dispatcher; `outcome` null: no access record (a malformed request). */
  refuse(reply: FastifyReply, status: number, message: string, type: ErrorType, outcome: RequestOutcome | null): void;
}

export function createReplyCallbacks(opts: ReplyCallbackOptions): ReplyCallbacks {
  const { events, now } = opts;
  const resumeSettings: ResumeSettings = {
    dispatcher: opts.dispatcher,
    origin: FLEET_ORIGIN,
    events,
    limit: opts.resumeLimit,
    waitMs: opts.resumeWaitMs,
  };

  const record = (request: FastifyRequest, status: number, outcome: RequestOutcome, relay: RelayResult | null) => {
    const traffic = request.traffic as Traffic;
    unwatchConnection(request.raw.socket, traffic.onClientClose);
    // A bug in an observer costs its record, never the process: this runs in stream callbacks.
    try {
      const completionTokens = relay ? completionTokensIn(relay.tail) : null;
      const entry: RequestRecord = {
        backend: traffic.context.backend,
        method: request.raw.method ?? 'GET',
        path: request.raw.url ?? '/',
        status,
        durationMs: now() - traffic.started,
        ttfbMs: relay?.firstByteAt != null ? relay.firstByteAt - traffic.started : null,
        priorityClass: traffic.context.traits?.priority ?? null,
        queueMs: traffic.context.dispatchedAt !== null ? traffic.context.dispatchedAt - traffic.started : null,
        bytes: relay?.bytes ?? 0,
        retries: traffic.context.retries,
        resumes: traffic.resume?.count ?? 0,
        backends: traffic.resume?.backends ?? [],
        outcome,
        completionTokens,
        streamed: traffic.sse,
      };
      events.emit('request', entry);
      if (traffic.trace !== null) endTrace(traffic, entry, relay);
    } catch (error) {
      request.log.error({ err: error, method: request.raw.method, path: request.raw.url }, 'request observer failed');
    }
  };

  const endTrace = (traffic: Traffic, entry: RequestRecord, relay: RelayResult | null) => {
    const tail = relay?.tail ?? null;
    const clock = traffic.tokens;
    const firstAt = clock?.firstTokenAt ?? null;
    (traffic.trace as RequestSpan).end(
      entry,
      {
        inputTokens: promptTokensIn(tail),
        outputTokens: entry.completionTokens ?? (clock !== null && clock.events > 0 ? clock.events : null),
        finishReason: finishReasonIn(tail),
        ttftSeconds: firstAt !== null ? (firstAt - traffic.started) / 1000 : null,
      },
      now(),
    );
  };

  const refuse: ReplyCallbacks['refuse'] = (reply, status, message, type, outcome) => {
    if (outcome === 'shutdown') reply.header('connection', 'close');
    if (status === 503 || status === 429) reply.header('retry-after', opts.retryAfterSeconds);
    sendError(reply, status, message, type);
    if (outcome !== null) record(reply.request, status, outcome, null);
  };

  /** The request got no response (reply-from wraps the cause). */
  const onError = (reply: FastifyReply, { error }: { error: Error }) => {
    const request = reply.request;
    const traffic = request.traffic as Traffic;
    const cause = (error.cause as Error | undefined) ?? error;
    const refusal = cause instanceof AdmissionError ? admissionRefusal(cause) : null;
    if (traffic.context.clientGone.aborted || refusal?.outcome === 'client_abort') {
      record(request, 499, 'client_abort', null);
      reply.hijack();
      reply.raw.destroy();
      return;
    }
    if (refusal !== null) {
      refuse(reply, refusal.status, refusal.message, refusal.type, refusal.outcome);
      return;
    }
    const failure = classifyUpstreamError(cause);
    refuse(reply, failure.status, failure.message, errorTypeFor(failure.status), 'upstream_error');
  };

  /** Status and headers are in: write them, then relay the body. */
  const onResponse = (
    request: FastifyRequest,
    reply: FastifyReply,
    res: { statusCode: number; headers: IncomingHttpHeaders; stream: Readable },
  ) => {
    const traffic = request.traffic as Traffic;
    const sse = String(res.headers['content-type'] ?? '').startsWith('text/event-stream');
    traffic.sse = sse;
    const status = res.statusCode;
    reply.hijack();
    reply.raw.writeHead(status, reply.getHeaders() as OutgoingHttpHeaders);
    traffic.resume = sse && status === 200 ? resumableStream(request, traffic) : null;
    const tokens = tokenClock(request, traffic, status, sse);
    traffic.tokens = tokens ?? null;
    relayBody(res.stream, reply.raw, {
      sse,
      now,
      clientStallTimeout: opts.clientStallTimeout,
      resume: traffic.resume ?? undefined,
      tokens,
      ended: (result) => {
        const end = result.end.type;
        if (end === 'complete') tokens?.finished(now(), completionTokensIn(result.tail));
        record(
          request,
          status,
          end === 'complete' ? 'ok' : end === 'client_abort' ? 'client_abort' : 'upstream_error',
          result,
        );
      },
    });
  };

  /** A generation's answer (a POST answered 200) is timed when an observer listens. */
  const tokenClock = (request: FastifyRequest, traffic: Traffic, status: number, sse: boolean) => {
    const observer = events.tokens;
    const backend = traffic.context.backend;
    if (observer === null || backend === null || status !== 200 || request.raw.method !== 'POST') return undefined;
    const key = apiOf(request.raw.url ?? '/') === 'chat' ? CHAT_CONTENT : TEXT_CONTENT;
    return new TokenClock(observer, backend, sse, traffic.started, key);
  };

  /** A streamed chat or completions answer continues after a cut unless resume is off for it. */
  const resumableStream = (request: FastifyRequest, traffic: Traffic): StreamResume | null => {
    const api = apiOf(request.raw.url ?? '/');
    if (api === null || resumeSettings.limit === 0 || traffic.sent === null || traffic.upstreamHeaders === null)
      return null;
    if (request.headers[RESUME_HEADER] === 'off') return null;
    return new StreamResume(resumeSettings, {
      api,
      path: request.raw.url ?? '/',
      json: traffic.sent,
      headers: traffic.upstreamHeaders,
      context: traffic.context,
    });
  };

  const rewriteRequestHeaders = (request: FastifyRequest, headers: RequestHeaders) => {
    upstreamRequestHeaders(headers, { peer: request.raw.socket.remoteAddress ?? '', apiKey: opts.upstreamApiKey });
    delete headers[RESUME_HEADER];
    const traffic = request.traffic as Traffic;
    traffic.upstreamHeaders = headers;
    return attachContext(headers, traffic.context);
  };

  const replyOptions = {
    onResponse,
    onError,
    rewriteRequestHeaders,
    rewriteHeaders: (headers: IncomingHttpHeaders) => clientResponseHeaders(headers),
    // The dispatcher retries where it is safe; reply-from would re-send a GET answered 503.
    retryDelay: () => null,
  };
  return { replyOptions, refuse };
}
