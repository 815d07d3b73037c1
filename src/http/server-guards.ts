/**
 * What the HTTP server refuses before any routing: requests node's parser rejects or that come too
 * slowly, `CONNECT` and absolute-form targets (fleetgate is not an open proxy). The first two are
 * answered straight on the socket: there is no request to answer through.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { errorBody, sendError } from './openai-error.js';

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

/** Without a listener node closes CONNECT connections silently; say why, then close. */
export function refuseConnect(server: Server): void {
  server.on('connect', (_request: IncomingMessage, socket: Duplex) => answerAndClose(socket, CONNECT_REFUSAL));
}

/** On the root, so that it runs before routing's 404 too: an absolute-form URL matches no route. */
export function refuseAbsoluteForm(app: FastifyInstance): void {
  app.addHook('onRequest', (request, reply, done) => {
    if (request.raw.url?.charCodeAt(0) === 47 /* / */) return done();
    reply.header('connection', 'close');
    sendError(reply, 400, 'absolute-form request targets are not accepted: fleetgate is not an open proxy');
  });
}
