/**
 * `GET /v1/models`: the models the fleet's ready backends serve, in OpenAI's list shape, answered by
 * fleetgate itself (forwarded to one backend, it would list only that backend's model). Guarded by
 * the same API keys as proxied traffic.
 */
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config/types.js';
import type { FleetRegistry } from '../fleet/registry.js';
import { apiKeyCheck } from '../http/bearer-keys.js';
import { sendError } from '../http/openai-error.js';

export function registerModelsRoute(app: FastifyInstance, registry: FleetRegistry, config: () => Config): void {
  const acceptsKey = apiKeyCheck(() => config().auth.api_keys);
  app.get('/v1/models', async (request, reply) => {
    if (!acceptsKey(request.headers.authorization)) {
      const message = 'missing or invalid API key (Authorization: Bearer <key>)';
      return sendError(reply, 401, message);
    }
    return {
      object: 'list',
      data: servedModels(registry).map((id) => ({ id, object: 'model', created: 0, owned_by: 'fleetgate' })),
    };
  });
}

/** The names the ready backends answer to, each once, sorted. */
export function servedModels(registry: FleetRegistry): string[] {
  const names = new Set<string>();
  for (const backend of registry.ready) if (backend.model !== null) names.add(backend.model);
  return [...names].sort();
}
