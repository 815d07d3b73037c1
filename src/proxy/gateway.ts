/**
 * Assembles a running fleetgate: the fleet (registry + health shells), admission queue, upstream
 * pools and the fleet dispatcher over them, and one fastify app serving fleetgate's own endpoints
 * and, on every other path, the traffic path (@fastify/http-proxy over the fleet dispatcher).
 */
import { createServer, type Server } from 'node:http';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Logger } from 'pino';
import { registerAdminRoutes } from '../admin/routes.js';
import type { Config } from '../config/types.js';
import type { DnsResolver } from '../fleet/dns-discovery.js';
import { Fleet } from '../fleet/fleet.js';
import { GatewayMetrics } from '../metrics/metrics.js';
import { FleetDispatcher } from '../routing/fleet-dispatcher.js';
import { createPolicy } from '../routing/policies.js';
import { UpstreamPools } from '../routing/upstream-pools.js';
import { WaitQueue } from '../routing/wait-queue.js';
import { attachAccessLog } from './access-log.js';
import { clientErrorHandler, registerServerGuards } from './guards.js';
import { ProxyEventBus } from './request-record.js';
import { registerTrafficRoutes } from './traffic-routes.js';

export interface GatewayOptions {
  logger: Logger;
  /** Injected clock for the lifecycle (tests). */
  now?: () => number;
  logPollMs?: number;
  /** Re-reads the configuration (for `POST /fleet/reload` and SIGHUP). */
  reloadConfig?: () => Config;
  /** DNS discovery's resolver (tests inject a stub). */
  resolver?: DnsResolver;
}

export interface Gateway {
  readonly app: FastifyInstance;
  readonly fleet: Fleet;
  readonly queue: WaitQueue;
  readonly events: ProxyEventBus;
  readonly metrics: GatewayMetrics;
  config: Config;
  /** Listens on `config.listen` (and `metrics_listen`); returns the bound main URL. */
  listen(): Promise<string>;
  /** Stops accepting, lets in-flight requests finish up to `drain_timeout`, then closes. */
  close(): Promise<void>;
}

export async function createGateway(config: Config, opts: GatewayOptions): Promise<Gateway> {
  const fleet = new Fleet(config, {
    now: opts.now,
    logPollMs: opts.logPollMs,
    resolver: opts.resolver,
    logger: opts.logger,
  });
  const registry = fleet.registry;
  const queue = new WaitQueue({
    maxWaiting: config.queue.max_waiting,
    timeoutMs: config.queue.timeout,
    timeoutOnlyWhenNoneReady: config.routing.max_inflight_per_backend === 'auto',
    ready: () => registry.ready,
    policy: createPolicy(config.routing.policy),
    onRelease: (backend) => registry.released(backend),
  });
  registry.on('transition', ({ to }) => {
    if (to === 'ready') queue.drain();
  });
  registry.on('capacity', () => queue.drain());
  const events = new ProxyEventBus();
  const metrics = new GatewayMetrics(registry, events, queue);
  const pools = new UpstreamPools(registry, config.upstream);
  attachAccessLog(opts.logger, registry, events, config.log.access);
  const dispatcher = new FleetDispatcher({
    registry,
    queue,
    pools,
    retries: config.routing.retries,
    observer: {
      failed: (backend, failure) => events.emit('upstream_error', { backend: backend.name, kind: failure.kind }),
      retried: (backend) => events.emit('retry', { backend: backend.name }),
    },
  });
  let closing = false;

  const app = Fastify({
    loggerInstance: opts.logger as FastifyBaseLogger,
    // fleetgate writes its own access log (one line per proxied request, with backend and retries).
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: config.limits.body_size,
    forceCloseConnections: 'idle',
    // Bad requests, header overflow and slow headers get an OpenAI-style error like every other one.
    clientErrorHandler,
    // fastify sets keepAliveTimeout and requestTimeout only on a server it creates itself, so here.
    serverFactory: (handler) => {
      const server = createServer(
        {
          maxHeaderSize: config.limits.header_size,
          // Node enforces the headers and request timeouts only when it checks its connections,
          // every 30 s by default: a slowloris client would hold a socket that long.
          connectionsCheckingInterval: Math.min(30_000, Math.max(100, Math.floor(config.limits.headers_timeout / 4))),
        },
        handler,
      );
      server.headersTimeout = config.limits.headers_timeout;
      // The client's request must arrive in time; the response (a long generation) has no limit here.
      server.requestTimeout = Math.max(config.limits.headers_timeout, 120_000);
      server.keepAliveTimeout = config.limits.keep_alive_timeout;
      if (config.limits.max_connections > 0) server.maxConnections = config.limits.max_connections;
      return server;
    },
  });

  const gateway: Gateway = {
    app,
    fleet,
    queue,
    events,
    metrics,
    config,
    listen: async () => {
      fleet.start();
      const address = await app.listen({ host: config.listen.host, port: config.listen.port });
      if (config.metrics_listen) await metrics.listen(config.metrics_listen);
      return address;
    },
    close: async () => {
      closing = true;
      const server: Server = app.server;
      const force = setTimeout(() => server.closeAllConnections(), config.shutdown.drain_timeout);
      force.unref();
      queue.close();
      await app.close();
      clearTimeout(force);
      await Promise.all([fleet.stop(), dispatcher.close(), metrics.close()]);
    },
  };

  registerServerGuards(app, config.limits.body_size);
  app.get('/metrics', async (_request, reply) => reply.type(metrics.contentType).send(await metrics.render()));
  await registerAdminRoutes(app, gateway, opts);
  registerTrafficRoutes(app, {
    config: () => gateway.config,
    dispatcher,
    events,
    closing: () => closing,
    retryAfterSeconds: Math.max(1, Math.ceil(config.health.starting_interval / 1000)),
  });

  return gateway;
}
