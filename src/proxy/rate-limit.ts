/**
 * Per-client request rate limits through @fastify/rate-limit: the proof that fastify plugins apply
 * to proxied traffic. Registered only when `rate_limit.enabled` at start (its hook costs every
 * request); `max` and `window` are read per request, so a reload changes them at once.
 */
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Config } from '../config/types.js';
import { bearerToken } from '../http/bearer-keys.js';
import type { ProxyEventBus } from './proxy-events.js';

/** The error the plugin throws over the limit; fleetgate's error handler turns it into an OpenAI-style body. */
class RateLimitError extends Error {
  readonly statusCode = 429;
}

/** What identifies a client: its API key (the `Authorization` bearer token) or, without one, its address. */
function clientKey(config: () => Config) {
  return (request: FastifyRequest): string => {
    const token = config().rate_limit.by === 'api_key' ? bearerToken(request.headers.authorization) : null;
    return token === null ? `address:${request.ip}` : `key:${token}`;
  };
}

export function registerRateLimit(scope: FastifyInstance, config: () => Config, events: ProxyEventBus): void {
  if (!config().rate_limit.enabled) return;
  scope.register(rateLimit, {
    global: true,
    hook: 'onRequest',
    max: () => config().rate_limit.max,
    timeWindow: () => config().rate_limit.window,
    keyGenerator: clientKey(config),
    errorResponseBuilder: (_request, context) =>
      new RateLimitError(`rate limit exceeded: ${context.max} requests per window; retry in ${context.after}`),
    onExceeded: (_request, key) => events.emit('rate_limited', { by: key.startsWith('key:') ? 'api_key' : 'address' }),
  });
}
