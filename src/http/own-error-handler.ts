/**
 * Errors fastify raises on fleetgate's own endpoints (body too large, schema validation, a bug in a
 * handler) get the same OpenAI-style body as the proxy's.
 */
import type { FastifyError, FastifyInstance } from 'fastify';
import { sendError } from './openai-error.js';

export function registerOwnErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const status = error.statusCode !== undefined && error.statusCode >= 400 ? error.statusCode : 500;
    if (status >= 500) request.log.error({ err: error }, 'request failed');
    return sendError(reply, status, status >= 500 ? 'internal error' : error.message);
  });
}
