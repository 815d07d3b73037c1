/** fleetgate's own endpoints: its probes, `/fleet` status (JSON, events, page) and the admin API. */
import type { FastifyInstance } from 'fastify';
import { registerAdminApi } from './admin-api.js';
import type { ControlPlane } from './control-plane.js';
import { registerProbeRoutes, type ServingPhase } from './probe-routes.js';
import { registerStatusRoutes, type StatusSources } from './status-routes.js';

export async function registerAdminRoutes(
  app: FastifyInstance,
  control: ControlPlane,
  status: Omit<StatusSources, 'registry' | 'config'>,
  phase?: () => ServingPhase,
): Promise<void> {
  const { registry } = control.fleet;
  registerProbeRoutes(app, registry, control.config, phase);
  await registerStatusRoutes(app, { registry, config: control.config, ...status });
  await registerAdminApi(app, control);
}
