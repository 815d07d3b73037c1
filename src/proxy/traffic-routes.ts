/**
 * The traffic path: every path that is not one of fleetgate's own goes through @fastify/http-proxy,
 * whose undici dispatcher is the fleet (routing/fleet-dispatcher.ts). Fastify hooks and plugins
 * therefore apply to proxied requests. In this scope: bodies are read whole as a Buffer (up to
 * `limits.body_size`, else 413) so the dispatcher can re-send them; unknown API keys get 401 and
 * requests during shutdown 503 before their body is read; the response body is relayed by
 * response-relay.ts, outside fastify's `send`, so that an SSE stream cut by the upstream can end
 * with an error event (fastify's `onSend` hooks therefore do not see proxied responses).
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import httpProxy from '@fastify/http-proxy';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config/types.js';
import { hasValidKey, keyDigest } from '../http/bearer-keys.js';
import { sendError as answer, type ErrorType, errorTypeFor } from '../http/openai-error.js';
import type { FleetDispatcher } from '../routing/fleet-dispatcher.js';
import { attachContext, RequestContext } from '../routing/request-context.js';
import { classifyUpstreamError } from '../routing/upstream-failures.js';
import { AdmissionError } from '../routing/wait-queue.js';
import type { PriorityStamp } from './backend-priority.js';
import { unwatchConnection, watchConnection } from './client-gone.js';
import { apiOf } from './continuation.js';
import { clientResponseHeaders, type RequestHeaders, upstreamRequestHeaders } from './headers.js';
import type { ProxyEventBus, RequestOutcome } from './proxy-events.js';
import { registerRateLimit } from './rate-limit.js';
import type { ContextReader, ContextRefusal } from './request-context-from.js';
import { completionTokensIn, type RelayResult, relayBody } from './response-relay.js';
import { type ResumeSettings, StreamResume } from './stream-resume.js';

export interface TrafficOptions {
  /** The running config, read per request: a reload that changes `auth.api_keys` applies at once. */
  config: () => Config;
  dispatcher: FleetDispatcher;
  /** Reads each request's traits, queue and stream flag, or why it is refused. */
  contextOf: ContextReader;
  events: ProxyEventBus;
  /** True once shutdown began: new requests are refused and their connection closed. */
  closing: () => boolean;
  /** Seconds, for `Retry-After` when the queue gives up. */
  retryAfterSeconds: number;
  /** Sends the request's class to the backend as its `priority` (`queue.classes[].backend_priority`). */
  stampPriority?: PriorityStamp;
}

/** What the proxy keeps per request: the context the dispatcher reads, and what the access record needs. */
interface Traffic {
  readonly context: RequestContext;
  readonly started: number;
  readonly onClientClose: () => void;
  sse: boolean;
  /** The body and headers as sent upstream: a stream's continuation is built from them. */
  sent: Buffer | null;
  upstreamHeaders: RequestHeaders | null;
  resume: StreamResume | null;
}

declare module 'fastify' {
  interface FastifyRequest {
    traffic: Traffic | null;
  }
}

/** The context of a refused request, which never reaches the dispatcher. */
const NO_CONTEXT = new RequestContext();

/** `off`: the client's stream is not continued after a cut (docs/stream-resume.md). */
const RESUME_HEADER = 'x-fleetgate-resume';

/** Not a real host: the fleet dispatcher picks the backend and ignores the origin. */
const FLEET_ORIGIN = 'http://fleet.invalid';

/**
 * Registers the traffic routes; they load with the app, so that hooks added to `app` before it is
 * ready apply to them too.
 */
export function registerTrafficRoutes(app: FastifyInstance, opts: TrafficOptions): void {
  // The dispatcher stamps `dispatchedAt` with the same clock: `queueMs` is a difference of the two.
  const now = performance.now.bind(performance);
  const { events } = opts;
  const startConfig = opts.config();
  const upstreamApiKey = startConfig.upstream.api_key;
  const clientStallTimeout = startConfig.upstream.stream_idle_timeout;
  const resumeSettings: ResumeSettings = {
    dispatcher: opts.dispatcher,
    origin: FLEET_ORIGIN,
    events,
    limit: startConfig.retry.resume_limit,
    waitMs: startConfig.retry.resume_wait,
  };

  const record = (request: FastifyRequest, status: number, outcome: RequestOutcome, relay: RelayResult | null) => {
    const traffic = request.traffic as Traffic;
    unwatchConnection(request.raw.socket, traffic.onClientClose);
    // A bug in an observer costs its record, never the process: this runs in stream callbacks.
    try {
      emitRecord(request, traffic, status, outcome, relay);
    } catch (error) {
      request.log.error({ err: error, method: request.raw.method, path: request.raw.url }, 'request observer failed');
    }
  };

  const emitRecord = (
    request: FastifyRequest,
    traffic: Traffic,
    status: number,
    outcome: RequestOutcome,
    relay: RelayResult | null,
  ) => {
    events.emit('request', {
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
      completionTokens: relay ? completionTokensIn(relay.tail) : null,
      streamed: traffic.sse,
    });
  };

  /** `outcome` null: a malformed request, answered without an access record. */
  const sendError = (
    reply: FastifyReply,
    status: number,
    message: string,
    type: ErrorType,
    outcome: RequestOutcome | null,
  ) => {
    if (outcome === 'shutdown') reply.header('connection', 'close');
    if (status === 503 || status === 429) reply.header('retry-after', opts.retryAfterSeconds);
    answer(reply, status, message, type);
    if (outcome !== null) record(reply.request, status, outcome, null);
  };

  /** @fastify/reply-from's `onError`: the request got no response (reply-from wraps the cause). */
  const onError = (reply: FastifyReply, { error }: { error: Error }) => {
    const request = reply.request;
    const traffic = request.traffic as Traffic;
    const cause = (error.cause as Error | undefined) ?? error;
    if (traffic.context.clientGone.aborted || (cause instanceof AdmissionError && cause.reason === 'aborted')) {
      record(request, 499, 'client_abort', null);
      reply.hijack();
      reply.raw.destroy();
      return;
    }
    if (cause instanceof AdmissionError) {
      if (cause.reason === 'shutdown') {
        sendError(reply, 503, cause.message, 'fleet_unavailable', 'shutdown');
        return;
      }
      const outcome = cause.reason === 'queue_full' ? 'queue_full' : 'queue_timeout';
      if (cause.fleetUnavailable) {
        sendError(reply, 503, `no backend ready to serve the request: ${cause.message}`, 'fleet_unavailable', outcome);
      } else {
        // The fleet is up but this class is over its own limit: the client should slow down.
        const message = `too many requests of class "${cause.className}" waiting: ${cause.message}`;
        sendError(reply, 429, message, 'rate_limit_exceeded', outcome);
      }
      return;
    }
    const failure = classifyUpstreamError(cause);
    sendError(reply, failure.status, failure.message, errorTypeFor(failure.status), 'upstream_error');
  };

  /** @fastify/reply-from's `onResponse`: status and headers are in; relay the body. */
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
    relayBody(res.stream, reply.raw, {
      sse,
      now,
      clientStallTimeout,
      resume: traffic.resume ?? undefined,
      ended: (result) => {
        const end = result.end.type;
        record(
          request,
          status,
          end === 'complete' ? 'ok' : end === 'client_abort' ? 'client_abort' : 'upstream_error',
          result,
        );
      },
    });
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
      body: traffic.sent,
      headers: traffic.upstreamHeaders,
      context: traffic.context,
    });
  };

  const rewriteRequestHeaders = (request: FastifyRequest, headers: RequestHeaders) => {
    upstreamRequestHeaders(headers, { peer: request.raw.socket.remoteAddress ?? '', apiKey: upstreamApiKey });
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

  app.register(async (scope) => {
    scope.decorateRequest('traffic', null);
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
    scope.addHook('onRequest', apiKeyAndShutdownGuard(opts));
    registerRateLimit(scope, opts.config, events);

    scope.register(httpProxy, {
      upstream: FLEET_ORIGIN,
      undici: opts.dispatcher as unknown as { request: FleetDispatcher['request'] },
      proxyPayloads: false,
      disableRequestLogging: true,
      replyOptions: replyOptions as never,
      handler: (request, reply, dest, options) => {
        const path = request.raw.url ?? '/';
        const received = (request.body as Buffer | undefined) ?? null;
        const read = opts.contextOf(path, request.headers, received);
        const context = 'status' in read ? null : read;
        const traffic: Traffic = {
          context: context ?? NO_CONTEXT,
          started: now(),
          sse: false,
          sent: null,
          upstreamHeaders: null,
          resume: null,
          onClientClose: () => {
            if (!reply.raw.writableFinished) traffic.context.clientGone.abort();
          },
        };
        request.traffic = traffic;
        if (context === null) {
          const refusal = read as ContextRefusal;
          return sendError(reply, refusal.status, refusal.message, refusal.type, refusal.outcome);
        }
        watchConnection(request.raw.socket, traffic.onClientClose);
        const priority = context.traits?.priority;
        const body =
          opts.stampPriority && priority !== undefined ? opts.stampPriority(path, priority, received) : received;
        traffic.sent = body;
        if (body === null) return reply.from(dest, options);
        const contentType = request.headers['content-type'] ?? 'application/octet-stream';
        return reply.from(dest, { ...options, body, contentType });
      },
    });
  });
}

/** Unknown API keys get 401 and requests during shutdown 503, before their body is read. */
function apiKeyAndShutdownGuard(opts: TrafficOptions) {
  let keySource: readonly string[] | null = null;
  let keys: Buffer[] = [];
  return (request: FastifyRequest, reply: FastifyReply, done: () => void) => {
    const apiKeys = opts.config().auth.api_keys;
    if (apiKeys !== keySource) {
      keySource = apiKeys;
      keys = apiKeys.map(keyDigest);
    }
    if (keys.length > 0 && !hasValidKey(request.headers.authorization, keys)) {
      answer(reply, 401, 'missing or invalid API key (Authorization: Bearer <key>)');
      return;
    }
    if (opts.closing()) {
      answer(reply.header('connection', 'close'), 503, 'fleetgate is shutting down');
      return;
    }
    done();
  };
}
