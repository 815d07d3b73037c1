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
import type { Tracing } from '../tracing/tracing.js';
import type { PriorityStamp } from './backend-priority.js';
import { watchConnection } from './client-gone.js';
import { type RequestHeaders, upstreamRequestHeaders } from './headers.js';
import { ProxiedRequest, RESUME_HEADER } from './proxied-request.js';
import type { ProxyEventBus } from './proxy-events.js';
import { registerRateLimit } from './rate-limit.js';
import { FLEET_ORIGIN, ReplyCallbacks } from './reply-callbacks.js';
import type { ContextReader } from './request-context-from.js';
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

  /** Admits the request (its owner reads it), answers a refusal, else hands it to the fleet. */
  const handler = (request: FastifyRequest, reply: FastifyReply, dest: string, options: object) => {
    const traffic = admit(request, reply);
    request.traffic = traffic;
    const refusal = traffic.refusal;
    if (refusal !== null)
      return callbacks.refuse(reply, refusal.status, refusal.message, refusal.type, refusal.outcome);
    watchConnection(request.raw.socket, traffic.onClientClose);
    const forward = () =>
      traffic.sendThrough(opts.dispatcher, () => {
        const body = upstreamBody(request, traffic);
        if (body === null) return reply.from(dest, options);
        const contentType = request.headers['content-type'] ?? 'application/octet-stream';
        return reply.from(dest, { ...options, body, contentType });
      });
    return traffic.ready === null ? forward() : traffic.ready.then(forward);
  };

  /** The request's owner, from what it says. */
  const admit = (request: FastifyRequest, reply: FastifyReply): ProxiedRequest => {
    const path = request.raw.url ?? '/';
    const body = (request.body as Buffer | undefined) ?? null;
    return new ProxiedRequest({
      method: request.raw.method ?? 'GET',
      path,
      headers: request.headers,
      body,
      started: now(),
      read: opts.contextOf(path, request.headers, body),
      tracing,
      answerPending: () => !reply.raw.writableFinished,
    });
  };

  /** The body sent upstream: as received, or with the class's `priority` stamped in. */
  const upstreamBody = (request: FastifyRequest, traffic: ProxiedRequest): Buffer | null => {
    const received = (request.body as Buffer | undefined) ?? null;
    const priority = traffic.context.traits?.priority;
    const json = traffic.sent;
    if (received === null || json === null || !opts.stampPriority || priority === undefined) return received;
    const stamped = opts.stampPriority(traffic.path, priority, json);
    if (stamped === null) return received;
    traffic.sendsRewritten(stamped);
    return Buffer.from(JSON.stringify(stamped));
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

/** The request's headers on their way upstream. */
function upstreamHeaders(apiKey: string | null) {
  return (request: FastifyRequest, headers: RequestHeaders) => {
    upstreamRequestHeaders(headers, { peer: request.raw.socket.remoteAddress ?? '', apiKey });
    delete headers[RESUME_HEADER];
    (request.traffic as ProxiedRequest).sentWith(headers);
    return headers;
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
