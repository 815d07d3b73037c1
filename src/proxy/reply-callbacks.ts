/**
 * The answer side of the traffic path, as @fastify/reply-from's callbacks: the response's status
 * and headers, then its body relayed by response-relay.ts (`onResponse`), and the answer to a
 * request that got no response (`onError`: a queue refusal from admission-refusals.ts,
 * else an upstream failure from routing/dispatch/upstream-failures.ts). Every ending emits one
 * `request` record (ProxiedRequest.end). The request side, up to the headers sent upstream, is
 * traffic-routes.ts.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { isEventStream } from '../http/event-stream.js';
import { type ErrorType, errorTypeFor, sendError } from '../http/openai-error.js';
import type { FleetDispatcher } from '../routing/dispatch/fleet-dispatcher.js';
import { classifyUpstreamError } from '../routing/dispatch/upstream-failures.js';
import { AdmissionError } from '../routing/queue/wait-queue.js';
import { admissionRefusal } from './admission-refusals.js';
import { unwatchConnection } from './client-gone.js';
import { clientResponseHeaders } from './headers.js';
import type { AnswerParts, ProxiedRequest } from './proxied-request.js';
import type { ProxyEventBus, RequestOutcome } from './proxy-events.js';
import { type RelayResult, relayBody } from './response-relay.js';
import type { ResumeSettings, TokenResumeSettings } from './stream-resume.js';

/** Not a real host: the fleet dispatcher picks the backend and ignores the origin. */
export const FLEET_ORIGIN = 'http://fleet.invalid';

export interface ReplyCallbackOptions {
  dispatcher: FleetDispatcher;
  events: ProxyEventBus;
  /** Seconds, for `Retry-After` on a 503 or 429. */
  retryAfterSeconds: number;
  /** `upstream.stream_idle_timeout` (ms): a client that reads nothing this long is cut. */
  clientStallTimeout: number;
  /** `retry.resume_limit` and `retry.resume_wait`. */
  resumeLimit: number;
  resumeWaitMs: number;
  /** Token-exact resume of chat streams; absent, streams resume as text. */
  tokenResume?: TokenResumeSettings;
  /** The clock `ProxiedRequest.started` is read on; the dispatcher stamps `dispatchedAt` with the same one. */
  now: () => number;
}

/** The callbacks over each request's `ProxiedRequest` (`request.traffic`), set by the route's handler. */
export class ReplyCallbacks {
  readonly #opts: ReplyCallbackOptions;
  readonly #answerParts: AnswerParts;

  constructor(opts: ReplyCallbackOptions) {
    this.#opts = opts;
    const resume: ResumeSettings = {
      dispatcher: opts.dispatcher,
      origin: FLEET_ORIGIN,
      events: opts.events,
      limit: opts.resumeLimit,
      waitMs: opts.resumeWaitMs,
      tokens: opts.tokenResume,
    };
    const events = opts.events;
    // The observer is read per answer: the metrics attach it after the routes, and detach it on close.
    this.#answerParts = {
      resume,
      get tokens() {
        return events.tokens;
      },
    };
  }

  /** reply-from's options for the traffic routes. */
  get replyOptions(): object {
    return {
      onResponse: this.#onResponse,
      onError: this.#onError,
      rewriteHeaders: (headers: IncomingHttpHeaders) => clientResponseHeaders(headers),
      // The dispatcher retries where it is safe; reply-from would re-send a GET answered 503.
      retryDelay: () => null,
    };
  }

  /** Answers a request that never reaches the dispatcher; `outcome` null: no access record (a malformed request). */
  refuse = (reply: FastifyReply, status: number, message: string, type: ErrorType, outcome: RequestOutcome | null) => {
    if (outcome === 'shutdown') reply.header('connection', 'close');
    if (status === 503 || status === 429) reply.header('retry-after', this.#opts.retryAfterSeconds);
    sendError(reply, status, message, type);
    if (outcome !== null) this.#record(reply.request, status, outcome, null);
  };

  #record(request: FastifyRequest, status: number, outcome: RequestOutcome, relay: RelayResult | null): void {
    const traffic = request.traffic as ProxiedRequest;
    unwatchConnection(request.raw.socket, traffic.onClientClose);
    // A bug in an observer costs its record, never the process: this runs in stream callbacks.
    try {
      const endedAt = this.#opts.now();
      this.#opts.events.emit('request', traffic.end(status, outcome, relay, endedAt));
    } catch (error) {
      request.log.error({ err: error, method: traffic.method, path: traffic.path }, 'request observer failed');
    }
  }

  /** The request got no response (reply-from wraps the cause). */
  #onError = (reply: FastifyReply, { error }: { error: Error }) => {
    const request = reply.request;
    const traffic = request.traffic as ProxiedRequest;
    const cause = (error.cause as Error | undefined) ?? error;
    const refusal = cause instanceof AdmissionError ? admissionRefusal(cause) : null;
    if (traffic.context.clientGone.aborted || refusal?.outcome === 'client_abort') {
      this.#record(request, 499, 'client_abort', null);
      reply.hijack();
      reply.raw.destroy();
      return;
    }
    if (refusal !== null) {
      this.refuse(reply, refusal.status, refusal.message, refusal.type, refusal.outcome);
      return;
    }
    const failure = classifyUpstreamError(cause);
    this.refuse(reply, failure.status, failure.message, errorTypeFor(failure.status), 'upstream_error');
  };

  /** Status and headers are in: write them, then relay the body. */
  #onResponse = (
    request: FastifyRequest,
    reply: FastifyReply,
    res: { statusCode: number; headers: IncomingHttpHeaders; stream: Readable },
  ) => {
    const traffic = request.traffic as ProxiedRequest;
    const status = res.statusCode;
    const sse = isEventStream(res.headers);
    reply.hijack();
    reply.raw.writeHead(status, reply.getHeaders() as OutgoingHttpHeaders);
    traffic.answerStarted(status, sse, this.#answerParts);
    relayBody(res.stream, reply.raw, {
      sse,
      now: this.#opts.now,
      clientStallTimeout: this.#opts.clientStallTimeout,
      reader: traffic.reader ?? undefined,
      resume: traffic.resume ?? undefined,
      tokens: traffic.tokens ?? undefined,
      ended: (result) => {
        const end = result.end.type;
        const outcome = end === 'complete' ? 'ok' : end === 'client_abort' ? 'client_abort' : 'upstream_error';
        this.#record(request, status, outcome, result);
      },
    });
  };
}
