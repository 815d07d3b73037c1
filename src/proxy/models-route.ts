/**
 * `GET /v1/models`: the models the fleet's ready backends serve, in OpenAI's list shape, answered by
 * fleetgate itself (forwarded to one backend, it would list only that backend's model). Guarded by
 * the same API keys as proxied traffic.
 */
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config/types.js';
import type { FleetRegistry } from '../fleet/registry.js';
import { apiKeyGuard } from '../http/api-key-guard.js';

export function registerModelsRoute(app: FastifyInstance, registry: FleetRegistry, config: () => Config): void {
  app.get('/v1/models', { onRequest: apiKeyGuard(config) }, async () => {
    return {
      object: 'list',
      data: servedModels(registry).map((id) => ({ id, object: 'model', created: 0, owned_by: 'fleetgate' })),
    };
  });
}

/** The names the ready backends answer to, each once, sorted. */
function servedModels(registry: FleetRegistry): string[] {
  const names = new Set<string>();
  for (const backend of registry.ready) if (backend.model !== null) names.add(backend.model);
  return [...names].sort();
}
