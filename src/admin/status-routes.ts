/** `GET /fleet/status` (JSON), `GET /fleet/events` (server-sent events) and `GET /fleet` (the status page). */
import type { FastifyInstance } from 'fastify';
import type { Gateway } from '../app.js';
import { ServingStats } from '../metrics/serving-stats.js';
import { FleetEventStream } from './fleet-events.js';
import { fleetStatus } from './fleet-summary.js';
import { STATUS_PAGE_HEADERS, STATUS_PAGE_HTML } from './status-page.js';

export async function registerStatusRoutes(app: FastifyInstance, gateway: Gateway): Promise<void> {
  const registry = gateway.fleet.registry;
  // Reload changes `gateway.config` in place, so min_ready is read per use.
  const minReady = () => gateway.config.min_ready;
  const waiting = () => gateway.queue.waitingByClass();
  const stats = new ServingStats({ registry, events: gateway.events, waiting: () => gateway.queue.waiting });
  app.addHook('onReady', async () => stats.start());
  app.addHook('onClose', async () => stats.stop());
  const serving = () => stats.view();
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
