/** `GET /fleet/status` (JSON), `GET /fleet/events` (server-sent events) and `GET /fleet` (the status page). */
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config/types.js';
import type { FleetRegistry } from '../fleet/registry.js';
import type { ServingStats } from '../metrics/serving-stats.js';
import { FleetEventStream } from './fleet-events.js';
import { fleetStatus } from './fleet-summary.js';
import { STATUS_PAGE_HEADERS, STATUS_PAGE_HTML } from './status-page.js';

/** What the status views read. */
export interface StatusSources {
  readonly registry: FleetRegistry;
  /** The running config: reload changes `min_ready` in place, so it is read per use. */
  readonly config: Config;
  /** The serving view, built, started and stopped by app.ts. */
  readonly stats: Pick<ServingStats, 'view'>;
  readonly queue: { readonly waiting: number; waitingByClass(): Record<string, number> };
}

export async function registerStatusRoutes(app: FastifyInstance, sources: StatusSources): Promise<void> {
  const { registry, config, queue } = sources;
  const minReady = () => config.min_ready;
  const waiting = () => queue.waitingByClass();
  const serving = () => sources.stats.view();
  const events = new FleetEventStream(registry, { minReady, waiting, serving });

  app.get('/fleet/status', async () => fleetStatus(registry, minReady(), waiting(), serving()));

  app.get('/fleet/events', { exposeHeadRoute: false }, (_request, reply) => {
    reply.hijack();
    events.add(reply.raw);
  });
  // Open event streams would hold `app.close()` until the drain timeout.
  app.addHook('preClose', async () => events.closeAll());

  app.get('/fleet', async (_request, reply) => reply.headers(STATUS_PAGE_HEADERS).send(STATUS_PAGE_HTML));
  // `/fleet/` would otherwise be proxied to a backend; the page's relative `fleet/events` needs `/fleet`.
  app.get('/fleet/', async (_request, reply) => reply.redirect('../fleet', 301));
}
