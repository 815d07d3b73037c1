/** fleetgate's own health for whatever sits in front of it: `/livez`, and `/readyz` (alias `/health`). */
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Config } from '../config/types.js';
import type { FleetRegistry } from '../fleet/registry.js';

/** `config` is the running one: reload changes `min_ready` in place. */
export function registerProbeRoutes(app: FastifyInstance, registry: FleetRegistry, config: Config): void {
  app.get('/livez', async () => ({ status: 'ok' }));
  // Ready while at least `min_ready` backends are (read live: reload may change it).
  const readiness = async (_request: unknown, reply: FastifyReply) => {
    const ready = registry.ready.length;
    const minReady = config.min_ready;
    const body = {
      status: ready >= minReady ? 'ready' : 'not_ready',
      ready,
      total: registry.size,
      min_ready: minReady,
    };
    return reply.code(ready >= minReady ? 200 : 503).send(body);
  };
  app.get('/readyz', readiness);
  app.get('/health', readiness);
}
