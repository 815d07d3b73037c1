/**
 * What the HTTP server refuses before any routing: requests node's parser rejects or that come too
 * slowly, `CONNECT` and absolute-form targets (fleetgate is not an open proxy). API keys are checked
 * on the traffic path (traffic-routes.ts), with `keyDigest` and `hasValidKey` from here.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance } from 'fastify';
import { errorBody } from './error-body.js';

/** What a malformed or too-slow request gets before fastify ever sees it. */
const CLIENT_ERRORS: Record<string, [number, string, string]> = {
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request Timeout', 'request headers not received in time'],
  HPE_HEADER_OVERFLOW: [431, 'Request Header Fields Too Large', 'request headers too large'],
};

function rawErrorResponse(status: number, reason: string, body: string): string {
  return (
    `HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  );
}

const CONNECT_REFUSAL = rawErrorResponse(
  405,
  'Method Not Allowed',
  errorBody('CONNECT is not accepted: fleetgate is not an open proxy', 'invalid_request_error', 405),
);

/** fastify's `clientErrorHandler`: node's HTTP parser refused the request (or it came too slowly). */
export function clientErrorHandler(error: NodeJS.ErrnoException, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, reason, message] = CLIENT_ERRORS[error.code ?? ''] ?? [
    400,
    'Bad Request',
    `malformed HTTP request (${error.code ?? error.message})`,
  ];
  answerAndClose(socket, rawErrorResponse(status, reason, errorBody(message, 'invalid_request_error', status)));
}

/** Writes the answer, then closes even if the client never does (node's HTTP sockets allow half-open). */
function answerAndClose(socket: Duplex, response: string): void {
  socket.on('error', () => {});
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  socket.once('finish', () => socket.destroy());
  socket.end(response);
}

/**
 * CONNECT and absolute-form targets are refused with a reason; errors fastify raises (body too
 * large, schema validation, rate limits) get the same OpenAI-style body as the proxy's.
 */
export function registerServerGuards(app: FastifyInstance, bodyLimit: number): void {
  // Without a listener node closes CONNECT connections silently; say why, then close.
  app.server.on('connect', (_request: IncomingMessage, socket: Duplex) => answerAndClose(socket, CONNECT_REFUSAL));

  // On the root, so that it runs before routing's 404 too: an absolute-form URL matches no route.
  app.addHook('onRequest', (request, reply, done) => {
    if (request.raw.url?.charCodeAt(0) === 47 /* / */) return done();
    const message = 'absolute-form request targets are not accepted: fleetgate is not an open proxy';
    reply
      .code(400)
      .header('connection', 'close')
      .type('application/json; charset=utf-8')
      .send(errorBody(message, 'invalid_request_error', 400));
  });

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const status = error.statusCode !== undefined && error.statusCode >= 400 ? error.statusCode : 500;
    if (status >= 500) request.log.error({ err: error }, 'request failed');
    let message = status >= 500 ? 'internal error' : error.message;
    if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      message = `request body too large: more than limits.body_size (${bodyLimit} bytes)`;
      // The rest of the body is not read: the connection cannot carry another request.
      reply.header('connection', 'close');
    }
    return reply
      .code(status)
      .type('application/json')
      .send(errorBody(message, errorType(status), status));
  });
}

function errorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 409) return 'conflict_error';
  if (status === 429) return 'rate_limit_error';
  return status >= 500 ? 'server_error' : 'invalid_request_error';
}

/**
 * Keys are compared as SHA-256 digests: always equal lengths, so the time taken tells nothing of a
 * key's length (`timingSafeEqual` itself needs equal lengths).
 */
export function keyDigest(key: string): Buffer {
  return createHash('sha256').update(key).digest();
}

/** `digests` from `keyDigest`. */
export function hasValidKey(authorization: string | undefined, digests: readonly Buffer[]): boolean {
  if (!authorization?.startsWith('Bearer ')) return false;
  const given = keyDigest(authorization.slice(7));
  let valid = false;
  // Compare against every key, always, so timing does not tell which one matched.
  for (const digest of digests) {
    if (timingSafeEqual(digest, given)) valid = true;
  }
  return valid;
}
