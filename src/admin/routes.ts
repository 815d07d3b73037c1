/** fleetgate's own fleet endpoints: status JSON (later: events, page, admin mutations). */
import type { FastifyInstance } from 'fastify';
import type { Gateway, GatewayOptions } from '../proxy/gateway.js';
import { fleetStatus } from './fleet-summary.js';

export async function registerAdminRoutes(app: FastifyInstance, gateway: Gateway, _opts: GatewayOptions): Promise<void> {
  app.get('/fleet/status', async () => fleetStatus(gateway.fleet.registry, gateway.config.min_ready));
}
