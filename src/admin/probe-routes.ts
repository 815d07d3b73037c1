/** fleetgate's own health for whatever sits in front of it: `/livez`, and `/readyz` (alias `/health`). */
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Gateway } from '../app.js';

export function registerProbeRoutes(app: FastifyInstance, gateway: Gateway): void {
  const registry = gateway.fleet.registry;
  app.get('/livez', async () => ({ status: 'ok' }));
  // Ready while at least `min_ready` backends are (read live: reload may change it).
  const readiness = async (_request: unknown, reply: FastifyReply) => {
    const ready = registry.ready.length;
    const minReady = gateway.config.min_ready;
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
