/**
 * The attempt loop. reply-from re-sends only to the same URL and never a POST with a body, so
 * fleetgate buffers the body, picks a backend per attempt, and re-sends while no response byte
 * reached the client (reply-from's own retries stay off).
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type {} from '@fastify/reply-from';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FleetRegistry } from '../fleet/registry.js';
import { AdmissionError, type Lease, type WaitQueue } from '../routing/wait-queue.js';
import { ClientGone } from './client-gone.js';
import type { ProxyEventBus, RequestOutcome } from './request-record.js';
import { completionTokensIn, type PipeResult, pipeResponse } from './response-pipe.js';
import { classifyUpstreamError, errorBody, type UpstreamFailure } from './upstream-errors.js';
import type { UpstreamPools } from './upstream-pools.js';

export interface ForwarderOptions {
  registry: FleetRegistry;
  queue: WaitQueue;
  pools: UpstreamPools;
  events: ProxyEventBus;
  retries: number;
  /** Seconds, for `Retry-After` when the queue gives up. */
  retryAfterSeconds: number;
  upstreamApiKey: string | null;
  now?: () => number;
}

/** What reply-from really hands to `onResponse` (its typings say otherwise). */
interface UpstreamResponse {
  statusCode: number;
  headers: IncomingHttpHeaders;
  stream: Readable;
}

/** Headers that describe one hop, not the message (RFC 9110 7.6.1); dropped both ways. */
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'trailer', 'te'];
/**
 * Client request headers undici refuses (`invalid keep-alive header`, `expect header not supported`):
 * forwarded, a client's `Expect: 100-continue` (curl on large bodies) would fail as an upstream error
 * and count against a healthy backend. The body is already buffered, so none of them means anything
 * upstream.
 */
const REQUEST_HOP_BY_HOP = [...HOP_BY_HOP, 'expect', 'proxy-authorization'];

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

function isHtmlAnswerToApiCall(method: string, res: UpstreamResponse): boolean {
  return method === 'POST' && res.statusCode < 300 && /^\s*text\/html/i.test(String(res.headers['content-type']));
}

/** Header names listed in `Connection` are hop-by-hop too (RFC 9110 7.6.1). */
function dropConnectionListed(headers: IncomingHttpHeaders): void {
  const listed: unknown = headers.connection;
  // The common values name no other header.
  if (listed === undefined || listed === 'keep-alive' || listed === 'close') return;
  for (const name of String(listed).split(',')) delete headers[name.trim().toLowerCase()];
}

export function createForwarder(opts: ForwarderOptions) {
  const now = opts.now ?? performance.now.bind(performance);
  const { registry, queue, pools, events } = opts;

  const rewriteHeaders = (headers: IncomingHttpHeaders): IncomingHttpHeaders => {
    dropConnectionListed(headers);
    for (const name of HOP_BY_HOP) delete headers[name];
    return headers;
  };

  const rewriteRequestHeaders = (
    request: { headers: IncomingHttpHeaders; ip: string },
    headers: IncomingHttpHeaders,
  ): IncomingHttpHeaders => {
    const peer = request.ip;
    const prior = request.headers['x-forwarded-for'];
    headers['x-forwarded-for'] = prior ? `${prior}, ${peer}` : peer;
    headers['x-forwarded-proto'] = 'http';
    for (const name of REQUEST_HOP_BY_HOP) delete headers[name];
    if (opts.upstreamApiKey !== null) headers.authorization = `Bearer ${opts.upstreamApiKey}`;
    return headers;
  };

  return async function forward(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const started = now();
    const raw = reply.raw;
    const clientGone = new ClientGone();
    raw.once('close', () => {
      if (!raw.writableFinished) clientGone.abort();
    });
    const body = request.body as Buffer | undefined;
    let tried: Set<Lease['backend']> | undefined;
    let retries = 0;
    let sse = false;

    const record = (backend: string | null, status: number, outcome: RequestOutcome, pipe: PipeResult | null) => {
      events.emit('request', {
        backend,
        method: request.method,
        path: request.url,
        status,
        durationMs: now() - started,
        ttfbMs: pipe?.firstByteAt != null ? pipe.firstByteAt - started : null,
        bytes: pipe?.bytes ?? 0,
        retries,
        outcome,
        completionTokens: pipe ? completionTokensIn(pipe.tail) : null,
        streamed: sse,
      });
    };

    const sendError = (
      status: number,
      message: string,
      type: string,
      backend: string | null,
      outcome: RequestOutcome,
    ) => {
      if (raw.headersSent || raw.destroyed) return;
      if (status === 503) reply.header('retry-after', String(opts.retryAfterSeconds));
      reply
        .code(status)
        .type('application/json')
        .send(errorBody(message, type, status));
      record(backend, status, outcome, null);
    };

    const attempt = async (): Promise<void> => {
      let lease: Lease;
      try {
        lease = await queue.acquire(clientGone, tried);
      } catch (error) {
        if (!(error instanceof AdmissionError)) throw error;
        if (error.reason === 'aborted') {
          record(null, 499, 'client_abort', null);
          return;
        }
        const outcome = error.reason === 'queue_full' ? 'queue_full' : 'queue_timeout';
        sendError(503, `no backend ready to serve the request: ${error.message}`, 'fleet_unavailable', null, outcome);
        return;
      }
      const backend = lease.backend;
      tried ??= new Set();
      tried.add(backend);
      // Free the slot if the client leaves before the upstream answers (reply-from then never calls back).
      const onClientGone = () => lease.release();
      clientGone.addEventListener('abort', onClientGone);

      const onFailure = (failure: UpstreamFailure) => {
        clientGone.removeEventListener('abort', onClientGone);
        lease.release();
        // Our own abort of the upstream (the client left) says nothing about the backend.
        if (clientGone.aborted) {
          record(backend.name, 499, 'client_abort', null);
          return;
        }
        events.emit('upstream_error', { backend: backend.name, kind: failure.kind });
        registry.apply(backend, { type: 'traffic', outcome: failure.outcome, detail: failure.kind });
        if (failure.retryable && retries < opts.retries && !reply.sent && !raw.headersSent) {
          retries++;
          events.emit('retry', { backend: backend.name });
          void attempt();
          return;
        }
        const type = failure.status === 504 ? 'upstream_timeout' : 'upstream_error';
        sendError(failure.status, failure.message, type, backend.name, 'upstream_error');
      };

      pools.currentSignal = clientGone;
      try {
        reply.from(backend.url + request.url, {
          body: body !== undefined && body.length > 0 ? body : undefined,
          contentType: request.headers['content-type'] ?? 'application/octet-stream',
          retriesCount: 0,
          rewriteHeaders,
          rewriteRequestHeaders,
          onError: (_reply, { error }) => onFailure(classifyUpstreamError(error)),
          onResponse: (_request, _reply, upstream) => {
            const res = upstream as unknown as UpstreamResponse;
            if (isHtmlAnswerToApiCall(request.method, res)) {
              res.stream.destroy();
              // reply-from copied the page's headers (its Content-Length among them) onto the reply.
              for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name);
              onFailure(HTML_ANSWER);
              return;
            }
            clientGone.removeEventListener('abort', onClientGone);
            const status = res.statusCode;
            registry.apply(backend, { type: 'traffic', outcome: status >= 500 ? 'http_5xx' : 'ok' });
            reply.hijack();
            raw.writeHead(status, reply.getHeaders() as OutgoingHttpHeaders);
            sse = String(res.headers['content-type'] ?? '').startsWith('text/event-stream');
            pipeResponse(res.stream, raw, sse, now, (pipe) => {
              lease.release();
              if (pipe.end.type === 'upstream_error') {
                events.emit('upstream_error', { backend: backend.name, kind: pipe.end.failure.kind });
                registry.apply(backend, {
                  type: 'traffic',
                  outcome: pipe.end.failure.outcome,
                  detail: pipe.end.failure.kind,
                });
              }
              const outcome = pipe.end.type === 'complete' ? 'ok' : pipe.end.type;
              record(backend.name, status, outcome, pipe);
            });
          },
        });
      } finally {
        pools.currentSignal = null;
      }
    };

    await attempt();
    return reply;
  };
}
