/**
 * What the proxy refuses before routing: fleetgate is not an open proxy (absolute-form targets are
 * refused; upstream is always a configured backend), and with `auth.api_keys` only known clients pass.
 */
import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config/types.js';
import { errorBody } from './upstream-errors.js';

/** fleetgate's own endpoints, which never need a client API key (probes, scrapes, the status page). */
const OWN_PATHS = /^\/(livez|readyz|health|metrics|fleet)(\/|\?|$)/;

export function registerProxyGuards(app: FastifyInstance, config: Config): void {
  const keys = config.auth.api_keys.map((key) => Buffer.from(key));
  app.addHook('onRequest', async (request, reply) => {
    const target = request.raw.url ?? '';
    if (target.charCodeAt(0) !== 47 /* / */) {
      return reply
        .code(400)
        .type('application/json')
        .send(errorBody('absolute-form request targets are not accepted: fleetgate is not an open proxy', 'invalid_request_error', 400));
    }
    if (keys.length > 0 && !OWN_PATHS.test(target) && !hasValidKey(request.headers.authorization, keys)) {
      return reply
        .code(401)
        .type('application/json')
        .send(errorBody('missing or invalid API key (Authorization: Bearer <key>)', 'authentication_error', 401));
    }
  });
}

export function hasValidKey(authorization: string | undefined, keys: readonly Buffer[]): boolean {
  if (!authorization?.startsWith('Bearer ')) return false;
  const given = Buffer.from(authorization.slice(7));
  let valid = false;
  // Compare against every key, always, so timing does not tell which prefix matched.
  for (const key of keys) {
    if (key.length === given.length && timingSafeEqual(key, given)) valid = true;
  }
  return valid;
}
