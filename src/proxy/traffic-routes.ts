/**
 * The traffic path: every path that is not one of fleetgate's own goes through @fastify/http-proxy,
 * whose undici dispatcher is the fleet (routing/dispatch/fleet-dispatcher.ts). Fastify hooks and plugins
 * therefore apply to proxied requests. In this scope: bodies are read whole as a Buffer (up to
 * `limits.body_size`, else 413) so the dispatcher can re-send them; unknown API keys get 401
 * (`http/api-key-guard.ts`) and requests during shutdown 503 before their body is read; the response body is relayed by
 * response-relay.ts (through reply-callbacks.ts), outside fastify's `send`, so that an SSE stream
 * cut by the upstream can end with an error event (fastify's `onSend` hooks therefore do not see
 * proxied responses).
 */
import httpProxy from '@fastify/http-proxy';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config/types.js';
import { apiKeyGuard } from '../http/api-key-guard.js';
import { sendError } from '../http/openai-error.js';
import type { FleetDispatcher } from '../routing/dispatch/fleet-dispatcher.js';
import { attachContext, RequestContext } from '../routing/request-context.js';
import type { Tracing } from '../tracing/tracing.js';
import type { PriorityStamp } from './backend-priority.js';
import { watchConnection } from './client-gone.js';
import { type RequestHeaders, upstreamRequestHeaders } from './headers.js';
import { ProxiedRequest } from './proxied-request.js';
import type { ProxyEventBus } from './proxy-events.js';
import { registerRateLimit } from './rate-limit.js';
import { FLEET_ORIGIN, ReplyCallbacks } from './reply-callbacks.js';
import type { ContextReader } from './request-context-from.js';
import { RequestSpan } from './request-trace.js';
import type { TokenResumeSettings } from './stream-resume.js';

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
  /** Spans for each request (`tracing`); null while tracing is off. */
  tracing?: Tracing | null;
  /** Token-exact resume of chat streams (config `model`); absent, streams resume as text. */
  tokenResume?: TokenResumeSettings;
}

/** The context of a refused request, which never reaches the dispatcher. */
const NO_CONTEXT = new RequestContext();

/**
 * Registers the traffic routes; they load with the app, so that hooks added to `app` before it is
 * ready apply to them too.
 */
export function registerTrafficRoutes(app: FastifyInstance, opts: TrafficOptions): void {
  // The dispatcher stamps `dispatchedAt` with the same clock: `queueMs` is a difference of the two.
  const now = performance.now.bind(performance);
  const startConfig = opts.config();
  const tracing = opts.tracing ?? null;
  const callbacks = new ReplyCallbacks({
    dispatcher: opts.dispatcher,
    events: opts.events,
    retryAfterSeconds: opts.retryAfterSeconds,
    clientStallTimeout: startConfig.upstream.stream_idle_timeout,
    resumeLimit: startConfig.retry.resume_limit,
    resumeWaitMs: startConfig.retry.resume_wait,
    tokenResume: opts.tokenResume,
    now,
  });

  /** Reads the request's context, answers a refusal, else hands the request to the fleet. */
  const handler = (request: FastifyRequest, reply: FastifyReply, dest: string, options: object) => {
    const path = request.raw.url ?? '/';
    const received = (request.body as Buffer | undefined) ?? null;
    const read = opts.contextOf(path, request.headers, received);
    const started = now();
    const method = request.raw.method ?? 'GET';
    const trace = tracing ? new RequestSpan(tracing, method, path, request.headers, started) : null;
    const context = 'status' in read ? NO_CONTEXT : read.context;
    const traffic = new ProxiedRequest(context, { method, path, started, trace }, () => {
      if (!reply.raw.writableFinished) context.clientGone.abort();
    });
    request.traffic = traffic;
    traffic.resumable = request.headers[RESUME_HEADER] !== 'off';
    if ('status' in read) return callbacks.refuse(reply, read.status, read.message, read.type, read.outcome);
    if (trace !== null) {
      read.context.trace = trace;
      if (received !== null) trace.describe(received);
    }
    watchConnection(request.raw.socket, traffic.onClientClose);
    if (received === null) return reply.from(dest, options);
    const priority = read.context.traits?.priority;
    const stamped = opts.stampPriority && priority !== undefined ? opts.stampPriority(path, priority, read.json) : null;
    traffic.sent = stamped === null ? read.json : () => stamped;
    const body = stamped === null ? received : Buffer.from(JSON.stringify(stamped));
    const contentType = request.headers['content-type'] ?? 'application/octet-stream';
    return reply.from(dest, { ...options, body, contentType });
  };

  app.register(async (scope) => {
    scope.decorateRequest('traffic', null);
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
    scope.addHook('onRequest', apiKeyGuard(opts.config));
    scope.addHook('onRequest', shutdownGuard(opts.closing));
    registerRateLimit(scope, opts.config, opts.events);

    scope.register(httpProxy, {
      upstream: FLEET_ORIGIN,
      undici: opts.dispatcher as unknown as { request: FleetDispatcher['request'] },
      proxyPayloads: false,
      disableRequestLogging: true,
      replyOptions: {
        ...callbacks.replyOptions,
        rewriteRequestHeaders: upstreamHeaders(startConfig.upstream.api_key),
      } as never,
      handler,
    });
  });
}

/** `off`: the client's stream is not continued after a cut (docs/stream-resume.md). */
const RESUME_HEADER = 'x-fleetgate-resume';

/** The request's headers on their way upstream, with its context riding along for the dispatcher. */
function upstreamHeaders(apiKey: string | null) {
  return (request: FastifyRequest, headers: RequestHeaders) => {
    upstreamRequestHeaders(headers, { peer: request.raw.socket.remoteAddress ?? '', apiKey });
    delete headers[RESUME_HEADER];
    const traffic = request.traffic as ProxiedRequest;
    traffic.upstreamHeaders = headers;
    return attachContext(headers, traffic.context);
  };
}

/** Requests during shutdown get 503, their connection closed, before their body is read. */
function shutdownGuard(closing: () => boolean) {
  return (_request: FastifyRequest, reply: FastifyReply, done: () => void) => {
    if (closing()) {
      sendError(reply.header('connection', 'close'), 503, 'fleetgate is shutting down');
      return;
    }
    done();
  };
}
