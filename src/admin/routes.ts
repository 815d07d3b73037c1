/** fleetgate's own endpoints: its probes, `/fleet` status (JSON, events, page) and the admin API. */
import type { FastifyInstance } from 'fastify';
import type { Gateway, GatewayOptions } from '../app.js';
import { registerAdminApi } from './admin-api.js';
import { registerProbeRoutes } from './probe-routes.js';
import { registerStatusRoutes } from './status-routes.js';

export async function registerAdminRoutes(app: FastifyInstance, gateway: Gateway, opts: GatewayOptions): Promise<void> {
  registerProbeRoutes(app, gateway);
  await registerStatusRoutes(app, gateway);
  await registerAdminApi(app, gateway, opts);
}
