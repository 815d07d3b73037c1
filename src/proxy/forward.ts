/**
 * The attempt loop. fleetgate buffers the request body, picks a backend per attempt, and re-sends
 * while no response byte reached the client; each attempt is one undici dispatch on the backend's
 * pool, relayed to the client by a ResponseRelay.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { ProgressWatchdog } from '../fleet/progress-watchdog.js';
import type { Backend, FleetRegistry } from '../fleet/registry.js';
import { answerError, answerInternalError, type ErrorType, errorTypeFor } from '../http/openai-error.js';
import type { PromptTraits } from '../routing/request-traits.js';
import { AdmissionError, type Lease } from '../routing/wait-queue.js';
import type { PriorityStamp } from './backend-priority.js';
import { ClientGone, unwatchConnection, watchConnection } from './client-gone.js';
import type { Forward } from './data-plane.js';
import { upstreamRequestHeaders } from './headers.js';
import type { Admission } from './model-admission.js';
import type { ProxyEventBus, RequestOutcome } from './proxy-events.js';
import type { TraitsReader } from './request-traits-from.js';
import { completionTokensIn, type RelayResult, ResponseRelay } from './response-relay.js';
import { stalledFailure, type UpstreamFailure } from './upstream-errors.js';
import type { UpstreamPools } from './upstream-pools.js';

export interface ForwarderOptions {
  registry: FleetRegistry;
  /** The queue a request waits in (its model's), or why it is refused. */
  admission: Admission;
  pools: UpstreamPools;
  events: ProxyEventBus;
  retries: number;
  /** Seconds, for `Retry-After` when the queue gives up. */
  retryAfterSeconds: number;
  upstreamApiKey: string | null;
  /** The request's priority class and API key, from its headers. */
  traitsOf: TraitsReader;
  /** ms a client may take no response bytes before it is cut off (`upstream.stream_idle_timeout`); 0 = none. */
  clientStallTimeout: number;
  /** Told of every attempt; ends the ones stuck on a backend that makes no progress. */
  watchdog?: ProgressWatchdog<Backend>;
  logger: Logger;
  now?: () => number;
  /** Sets the class's `priority` in the body sent upstream (`queue.classes[].backend_priority`); unset: none does. */
  stampPriority?: PriorityStamp;
  /** The prompt traits the policy routes on, read from the request; set only for a policy that uses them. */
  promptTraits?: (path: string, headers: IncomingHttpHeaders, body: Buffer | null) => PromptTraits | undefined;
}

/**
 * A web page in answer to an API call (POST) means something else answers on the backend's port (a
 * dashboard, a default nginx page); SGLang, vLLM and OpenAI servers answer JSON or SSE. A GET (e.g.
 * FastAPI's `/docs`) is passed as it is.
 */
const HTML_ANSWER: UpstreamFailure = {
  kind: 'bad_response',
  outcome: 'http_5xx',
  status: 502,
  retryable: false,
  message: 'backend answered an API call with an HTML page (is another server listening on its port?)',
};

function isHtmlAnswerToApiCall(method: string, status: number, headers: IncomingHttpHeaders): boolean {
  return method === 'POST' && status < 300 && /^\s*text\/html/i.test(String(headers['content-type']));
}

const STREAM_KEY = Buffer.from('"stream"');

/** Whether a JSON body asks for `"stream": true`, without parsing it (the body may be megabytes). */
export function asksForStream(body: Buffer | null): boolean {
  if (body === null) return false;
  for (let at = body.indexOf(STREAM_KEY); at >= 0; at = body.indexOf(STREAM_KEY, at + 1)) {
    let i = at + STREAM_KEY.length;
    while (i < body.length && (body[i] === 0x20 || body[i] === 0x0a || body[i] === 0x0d || body[i] === 0x09)) i++;
    if (body[i] !== 0x3a /* : */) continue;
    i++;
    while (i < body.length && (body[i] === 0x20 || body[i] === 0x0a || body[i] === 0x0d || body[i] === 0x09)) i++;
    if (body.subarray(i, i + 4).toString('latin1') === 'true') return true;
  }
  return false;
}

export function createForwarder(opts: ForwarderOptions): Forward {
  const now = opts.now ?? performance.now.bind(performance);
  const { registry, pools, events } = opts;

  // Not async: a request admitted at once goes upstream in the same tick, with no promise on the way.
  return function forward(request: IncomingMessage, raw: ServerResponse, body: Buffer | null): void {
    const { traits: classTraits, problem } = opts.traitsOf(request.headers);
    if (problem !== null) {
      answerError(raw, 400, problem, 'invalid_request_error');
      return;
    }
    const started = now();
    const method = request.method ?? 'GET';
    const path = request.url ?? '/';

    const clientGone = new ClientGone();
    const onClose = () => {
      if (!raw.writableFinished) clientGone.abort();
    };
    const socket = request.socket;
    watchConnection(socket, onClose);
    const headers = upstreamRequestHeaders(request.rawHeaders, {
      peer: socket.remoteAddress ?? '',
      apiKey: opts.upstreamApiKey,
    });
    const prompt = opts.promptTraits?.(path, request.headers, body);
    const traits = prompt === undefined ? classTraits : { ...classTraits, ...prompt };
    let tried: Set<Lease['backend']> | undefined;
    let retries = 0;
    let sse = false;
    const streamed = opts.watchdog?.enabled === true && asksForStream(body);
    const upstreamBody = opts.stampPriority ? opts.stampPriority(path, classTraits.priority, body) : body;

    const record = (backend: string | null, status: number, outcome: RequestOutcome, relay: RelayResult | null) => {
      unwatchConnection(socket, onClose);
      events.emit('request', {
        backend,
        method,
        path,
        status,
        durationMs: now() - started,
        ttfbMs: relay?.firstByteAt != null ? relay.firstByteAt - started : null,
        bytes: relay?.bytes ?? 0,
        retries,
        outcome,
        completionTokens: relay ? completionTokensIn(relay.tail) : null,
        streamed: sse,
      });
    };

    const sendError = (
      status: number,
      message: string,
      type: ErrorType,
      backend: string | null,
      outcome: RequestOutcome,
    ) => {
      if (raw.headersSent || raw.destroyed) return;
      const retryAfter = status === 503 || status === 429 ? opts.retryAfterSeconds : undefined;
      answerError(raw, status, message, type, { retryAfter, close: outcome === 'shutdown' });
      record(backend, status, outcome, null);
    };

    /**
     * A bug in fleetgate's own bookkeeping (an observer that throws) costs this request, never the
     * process: thrown inside an undici callback it would surface as an unhandled 'error' event.
     */
    const internalError = (error: unknown) => answerInternalError(opts.logger, error, request, raw);

    const refused = (error: unknown) => {
      if (!(error instanceof AdmissionError)) throw error;
      if (error.reason === 'aborted') {
        record(null, 499, 'client_abort', null);
        return;
      }
      if (error.reason === 'shutdown') {
        sendError(503, error.message, 'fleet_unavailable', null, 'shutdown');
        return;
      }
      const outcome = error.reason === 'queue_full' ? 'queue_full' : 'queue_timeout';
      if (error.fleetUnavailable) {
        sendError(503, `no backend ready to serve the request: ${error.message}`, 'fleet_unavailable', null, outcome);
      } else {
        // The fleet is up but this class is over its own limit: the client should slow down.
        const message = `too many requests of class "${error.className}" waiting: ${error.message}`;
        sendError(429, message, 'rate_limit_exceeded', null, outcome);
      }
    };

    const queue = opts.admission(body);
    if (!('acquire' in queue)) {
      sendError(queue.status, queue.message, queue.type, null, 'model_refused');
      return;
    }

    const attempt = (): void => {
      const admitted = queue.acquire(clientGone, tried, traits);
      if (admitted instanceof Promise) admitted.then(send, refused).catch(internalError);
      else send(admitted);
    };

    const send = (lease: Lease): void => {
      const backend = lease.backend;
      tried ??= new Set();
      tried.add(backend);
      let status = 0;

      const reportFailure = (failure: UpstreamFailure) => {
        events.emit('upstream_error', { backend: backend.name, kind: failure.kind });
        if (failure.outcome !== null) {
          registry.apply(backend, { type: 'traffic', outcome: failure.outcome, detail: failure.kind });
        }
      };

      const failedBeforeResponse = (failure: UpstreamFailure) => {
        reportFailure(failure);
        if (failure.retryable && retries < opts.retries && !raw.headersSent) {
          retries++;
          events.emit('retry', { backend: backend.name });
          attempt();
          return;
        }
        sendError(failure.status, failure.message, errorTypeFor(failure.status), backend.name, 'upstream_error');
      };

      const relay = new ResponseRelay(
        raw,
        {
          check: (code, responseHeaders) => (isHtmlAnswerToApiCall(method, code, responseHeaders) ? HTML_ANSWER : null),
          started: (code, isSse) => {
            status = code;
            sse = isSse;
            registry.apply(backend, { type: 'traffic', outcome: code >= 500 ? 'http_5xx' : 'ok' });
          },
          ended: (result) => {
            try {
              clientGone.removeEventListener('abort', cancel);
              lease.release();
              const end = result.end;
              tracked?.done(end.type === 'complete' && status < 300);
              if (end.type === 'client_abort') {
                record(backend.name, result.started ? status : 499, 'client_abort', result);
              } else if (end.type === 'complete') {
                record(backend.name, status, 'ok', result);
              } else if (!result.started) {
                failedBeforeResponse(end.failure);
              } else {
                reportFailure(end.failure);
                record(backend.name, status, 'upstream_error', result);
              }
            } catch (error) {
              internalError(error);
            }
          },
        },
        { now, clientStallTimeout: opts.clientStallTimeout },
      );
      const cancel = () => relay.cancel();
      clientGone.addEventListener('abort', cancel);
      const tracked = opts.watchdog?.track(backend, {
        streamed,
        bytes: () => (status >= 200 && status < 300 ? relay.bytes : 0),
        end: (reason) => relay.abandon(stalledFailure(reason)),
      });
      pools.dispatch(backend, { method: method as 'POST', path, headers, body: upstreamBody }, relay);
    };

    attempt();
  };
}
