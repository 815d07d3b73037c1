/**
 * The one `auth.api_keys` guard of fleetgate's client-facing routes (proxied traffic, `/v1/models`,
 * the Batch API): a request without one of the keys, when any is set, gets 401 in OpenAI's shape.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config/types.js';
import { apiKeyCheck } from './bearer-keys.js';
import { sendError } from './openai-error.js';

/** The 401 for a request whose key is missing or unknown. */
function refuseApiKey(reply: FastifyReply): FastifyReply {
  return sendError(reply, 401, 'missing or invalid API key (Authorization: Bearer <key>)');
}

/**
 * An `onRequest` hook: 401 (`refuseApiKey`) unless the request carries one of `auth.api_keys`, or
 * none is set. `adminToken`: `admin.token` is accepted as well.
 */
export function apiKeyGuard(
  config: () => Config,
  { adminToken = false }: { adminToken?: boolean } = {},
): (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply | undefined> {
  const accepts = apiKeyCheck(
    () => config().auth.api_keys,
    () => (adminToken ? config().admin.token : null),
  );
  // An async hook that answers returns the reply (fastify's rule), so the route does not run.
  return async (request, reply) => (accepts(request.headers.authorization) ? undefined : refuseApiKey(reply));
}
