/**
 * Errors fastify raises, on fleetgate's own endpoints and on the traffic path (body too large, schema
 * validation, rate limits, a bug in a handler), get the same OpenAI-style body as the proxy's.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sendError } from './openai-error.js';

export function registerOwnErrorHandler(app: FastifyInstance, bodyLimit: number): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const status = error.statusCode !== undefined && error.statusCode >= 400 ? error.statusCode : 500;
    if (status >= 500) request.log.error({ err: error }, 'request failed');
    if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      // The rest of the body is not read: the connection cannot carry another request.
      reply.header('connection', 'close');
      return sendError(reply, status, `request body too large: more than limits.body_size (${bodyLimit} bytes)`);
    }
    return sendError(reply, status, status >= 500 ? 'internal error' : error.message);
  });
}

/**
 * fastify's `frameworkErrors`: a URL it cannot decode (`/v1/%zz`, found by the fuzz suite) is refused
 * before any route or error handler runs, with fastify's own body shape unless this answers it.
 */
export function frameworkErrorHandler(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  const status =
    error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 400;
  sendError(reply, status, error.message);
}
