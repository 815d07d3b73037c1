/** `GET /fleet/status` (JSON). */
import type { FastifyInstance } from 'fastify';
import type { Gateway } from '../proxy/gateway.js';
import { fleetStatus } from './fleet-summary.js';

export async function registerStatusRoutes(app: FastifyInstance, gateway: Gateway): Promise<void> {
  app.get('/fleet/status', async () => fleetStatus(gateway.fleet.registry, gateway.config.min_ready));
}
