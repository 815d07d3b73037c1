/**
 * The composition root: builds a running fleetgate from its config, layer by layer (fleet, routing,
 * the traffic path, metrics, fleetgate's own endpoints), and starts and stops them in order. One
 * HTTP server: fleetgate's own endpoints go to fastify, every other request to the traffic path.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Logger } from 'pino';
import type { ControlPlane } from './admin/control-plane.js';
import { type ReloadOutcome, reload } from './admin/reload.js';
import { registerAdminRoutes } from './admin/routes.js';
import type { Config } from './config/types.js';
import type { DnsResolver } from './fleet/dns-discovery.js';
import { Fleet } from './fleet/fleet.js';
import { logTransitions } from './fleet/transition-log.js';
import { createHttpServer } from './http/http-server.js';
import { registerOwnErrorHandler } from './http/own-error-handler.js';
import { clientErrorHandler, refuseConnect } from './http/server-guards.js';
import { Launcher } from './launch/launcher.js';
import { GatewayMetrics } from './metrics/gateway-metrics.js';
import { attachAccessLog } from './proxy/access-log.js';
import { createPriorityStamp } from './proxy/backend-priority.js';
import { createDataPlane, OWN_PATHS } from './proxy/data-plane.js';
import { createForwarder } from './proxy/forward.js';
import { createModelAdmission } from './proxy/model-admission.js';
import { registerModelsRoute } from './proxy/models-route.js';
import { ProxyEventBus } from './proxy/proxy-events.js';
import { createTraitsReader } from './proxy/request-traits-from.js';
import { UpstreamPools } from './proxy/upstream-pools.js';
import { queuesOwnRequests } from './routing/backend-load.js';
import { createRouting, type FleetRouting } from './routing/fleet-routing.js';
import type { ModelQueues } from './routing/model-queues.js';
import type { ModelRouter } from './routing/model-route.js';
import { promptTraits } from './routing/request-traits.js';

export interface GatewayOptions {
  logger: Logger;
  /** Injected clock for the lifecycle (tests). */
  now?: () => number;
  logPollMs?: number;
  /** Re-reads the configuration (for `POST /fleet/reload` and SIGHUP). */
  reloadConfig?: () => Config;
  /** DNS discovery's resolver (tests inject a stub). */
  resolver?: DnsResolver;
  /** Start and supervise the engines of `config.launch` (`fleetgate launch`). */
  launch?: boolean;
}

export interface Gateway {
  readonly app: FastifyInstance;
  readonly fleet: Fleet;
  /** The wait queues: one per model pool, and one for a single-model fleet. */
  readonly queue: ModelQueues;
  readonly models: ModelRouter;
  readonly events: ProxyEventBus;
  readonly metrics: GatewayMetrics;
  /** The engines' supervisor under `fleetgate launch`; null under `serve`. */
  readonly launcher: Launcher | null;
  /** The running config; a reload changes its live keys in place. */
  readonly config: Config;
  /** Re-reads the config and applies it (`POST /fleet/reload`, SIGHUP); null without `reloadConfig`. */
  readonly reload: (() => ReloadOutcome) | null;
  /** Listens on `config.listen` (and `metrics_listen`); returns the bound main URL. */
  listen(): Promise<string>;
  /** Stops accepting, lets in-flight requests finish up to `drain_timeout`, then closes. */
  close(): Promise<void>;
}

/** The traffic path: every request that is not for fleetgate's own endpoints. */
interface Traffic {
  handle(req: IncomingMessage, res: ServerResponse): void;
  /** Shutdown began: new requests are refused. */
  stopAccepting(): void;
  close(): Promise<void>;
}

export async function createGateway(config: Config, opts: GatewayOptions): Promise<Gateway> {
  const { logger } = opts;
  const fleet = new Fleet(config, {
    now: opts.now,
    logPollMs: opts.logPollMs,
    resolver: opts.resolver,
    logger,
    hasOwnQueue: queuesOwnRequests,
  });
  const registry = fleet.registry;
  logTransitions(logger, registry);
  const launcher =
    opts.launch && config.launch !== null
      ? new Launcher({ config: config.launch, registry, logger, now: opts.now })
      : null;
  const routing = createRouting(config, registry);
  const events = new ProxyEventBus();
  const traffic = createTraffic(config, fleet, routing, events, logger);
  const metrics = new GatewayMetrics(registry, events, routing.queue, routing.prefix);

  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    // fleetgate writes its own access log (one line per proxied request, with backend and retries).
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: config.limits.body_size,
    forceCloseConnections: 'idle',
    // Bad requests, header overflow and slow headers get an OpenAI-style error like every other one.
    clientErrorHandler,
    serverFactory: (ownEndpoints) =>
      createHttpServer(config.limits, (req, res) =>
        OWN_PATHS.test(req.url ?? '') ? ownEndpoints(req, res) : traffic.handle(req, res),
      ),
  });
  refuseConnect(app.server);
  registerOwnErrorHandler(app);
  app.get('/metrics', async (_request, reply) => reply.type(metrics.contentType).send(await metrics.render()));
  registerModelsRoute(app, registry, () => config);
  const reloadConfig = opts.reloadConfig;
  const control: ControlPlane = {
    fleet,
    config,
    supervisorOf: (name) => launcher?.get(name),
    reload: reloadConfig ? () => reload(fleet, config, reloadConfig) : null,
  };
  await registerAdminRoutes(app, control, { events, queue: routing.queue });

  return {
    app,
    fleet,
    queue: routing.queue,
    models: routing.models,
    events,
    metrics,
    launcher,
    config,
    reload: control.reload,
    listen: async () => {
      fleet.start();
      const address = await app.listen({ host: config.listen.host, port: config.listen.port });
      if (config.metrics_listen) await metrics.listen(config.metrics_listen);
      // Once listening: a fleetgate that cannot take its port leaves no engines behind.
      launcher?.start();
      return address;
    },
    close: async () => {
      traffic.stopAccepting();
      const server = app.server;
      const force = setTimeout(() => server.closeAllConnections(), config.shutdown.drain_timeout);
      force.unref();
      routing.queue.close();
      await app.close();
      clearTimeout(force);
      await Promise.all([fleet.stop(), traffic.close(), metrics.close(), launcher?.stop()]);
    },
  };
}

function createTraffic(
  config: Config,
  fleet: Fleet,
  routing: FleetRouting,
  events: ProxyEventBus,
  logger: Logger,
): Traffic {
  const registry = fleet.registry;
  const prefix = config.routing.prefix;
  const traitsOptions = { blockChars: prefix.block_chars, sessionHeader: prefix.session_header?.toLowerCase() ?? null };
  const pools = new UpstreamPools(registry, config.upstream);
  if (config.log.access) attachAccessLog(logger, events);
  let closing = false;
  const handle = createDataPlane({
    config: () => config,
    closing: () => closing,
    logger,
    forward: createForwarder({
      registry,
      admission: createModelAdmission(routing.models, routing.queue),
      pools,
      events,
      retries: config.routing.retries,
      retryAfterSeconds: Math.max(1, Math.ceil(config.health.starting_interval / 1000)),
      upstreamApiKey: config.upstream.api_key,
      traitsOf: createTraitsReader(config.queue),
      stampPriority: createPriorityStamp(config.queue.classes),
      clientStallTimeout: config.upstream.stream_idle_timeout,
      watchdog: fleet.watchdog,
      logger,
      promptTraits:
        routing.prefix !== null ? (path, headers, body) => promptTraits(path, headers, body, traitsOptions) : undefined,
    }),
  });
  return {
    handle,
    stopAccepting: () => {
      closing = true;
    },
    close: () => pools.close(),
  };
}
