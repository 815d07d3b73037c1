/** fleetgate's own health for whatever sits in front of it: `/livez`, and `/readyz` (alias `/health`). */
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Config } from '../config/types.js';
import type { FleetRegistry } from '../fleet/registry.js';

/**
 * The process's own part in readiness: `warming` until the start-up warm-up (`upstream.warm_up`)
 * is done, `draining` from SIGTERM on (a load balancer stops sending before the listener closes).
 */
export type ServingPhase = 'warming' | 'serving' | 'draining';

/** `config` is the running one: reload changes `min_ready` in place. */
export function registerProbeRoutes(
  app: FastifyInstance,
  registry: FleetRegistry,
  config: Config,
  phase: () => ServingPhase = () => 'serving',
): void {
  app.get('/livez', async () => ({ status: 'ok' }));
  // Ready while at least `min_ready` backends are (read live: reload may change it) and the process
  // neither warms up nor drains.
  const readiness = async (_request: unknown, reply: FastifyReply) => {
    const ready = registry.ready.length;
    const minReady = config.min_ready;
    const own = phase();
    const status =
      own === 'draining' ? 'draining' : ready < minReady ? 'not_ready' : own === 'warming' ? 'warming' : 'ready';
    const body = { status, ready, total: registry.size, min_ready: minReady };
    return reply.code(status === 'ready' ? 200 : 503).send(body);
  };
  app.get('/readyz', readiness);
  app.get('/health', readiness);
}
