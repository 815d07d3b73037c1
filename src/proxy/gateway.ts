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
import { Launcher } from '../launch/launcher.js';
import { GatewayMetrics } from '../metrics/metrics.js';
import { FleetDispatcher } from '../routing/fleet-dispatcher.js';
import { ModelQueues } from '../routing/model-queues.js';
import { ModelRouter } from '../routing/model-route.js';
import { createPolicy } from '../routing/policies.js';
import type { PrefixAware } from '../routing/prefix-aware.js';
import { queueClassOptions } from '../routing/queue-classes.js';
import { promptTraits } from '../routing/request-traits.js';
import { UpstreamPools } from '../routing/upstream-pools.js';
import { WaitQueue } from '../routing/wait-queue.js';
import { attachAccessLog } from './access-log.js';
import { clientErrorHandler, registerServerGuards } from './guards.js';
import { createModelAdmission } from './model-admission.js';
import { registerModelsRoute } from './models-route.js';
import { createContextReader } from './request-context-from.js';
import { ProxyEventBus } from './request-record.js';
import { createTraitsReader } from './request-traits-from.js';
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
  const launcher =
    opts.launch && config.launch !== null
      ? new Launcher({ config: config.launch, registry, logger: opts.logger, now: opts.now })
      : null;
  const prefix = config.routing.prefix;
  const prefixAware = config.routing.policy === 'prefix-aware';
  const newPolicy = () =>
    createPolicy(config.routing.policy, {
      random: Math.random,
      prefix: {
        maxBlocks: prefix.max_blocks,
        ttlMs: prefix.ttl,
        minMatch: prefix.min_match,
        loadGap: prefix.load_gap,
        loadRatio: prefix.load_ratio,
      },
    });
  // prefix-aware keeps one record of what each backend caches, shared by the model queues (a backend
  // serves one model); the other policies get one instance per model (round-robin's cursor).
  const sharedPolicy = prefixAware ? newPolicy() : null;
  // One queue per model pool (and one for a single-model fleet). A freed slot may serve a waiter of
  // any queue its backend belongs to, hence drain them all.
  const queue: ModelQueues = new ModelQueues({
    make: (ready) =>
      new WaitQueue({
        maxWaiting: config.queue.max_waiting,
        ...queueClassOptions(config),
        ready,
        policy: sharedPolicy ?? newPolicy(),
        onRelease: (backend) => {
          registry.released(backend);
          queue.drain();
        },
      }),
    ready: () => registry.ready,
    serving: (model) => registry.readyServing(model),
  });
  const models = new ModelRouter({ aliases: config.models, defaultModel: config.default_model });
  const traitsOptions = { blockChars: prefix.block_chars, sessionHeader: prefix.session_header?.toLowerCase() ?? null };
  registry.on('transition', ({ backend, to }) => {
    if (to === 'ready') queue.drain();
    else sharedPolicy?.forget?.(backend.name);
  });
  registry.on('removed', (backend) => sharedPolicy?.forget?.(backend.name));
  registry.on('capacity', () => queue.drain());
  registry.on('models', () => {
    models.setPools(registry.models());
    queue.drain();
  });
  registry.on('removed', () => models.setPools(registry.models()));
  const events = new ProxyEventBus();
  const metrics = new GatewayMetrics(registry, events, queue, prefixAware ? (sharedPolicy as PrefixAware) : null);
  const pools = new UpstreamPools(registry, config.upstream);
  attachAccessLog(opts.logger, registry, events, config.log.access);
  const dispatcher = new FleetDispatcher({
    registry,
    queue: queue.any,
    pools,
    retries: config.routing.retries,
    observer: {
      failed: (backend, failure) => events.emit('upstream_error', { backend: backend.name, kind: failure.kind }),
      retried: (backend) => events.emit('retry', { backend: backend.name }),
    },
    watchdog: fleet.watchdog,
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
    models,
    events,
    metrics,
    launcher,
    config,
    listen: async () => {
      fleet.start();
      const address = await app.listen({ host: config.listen.host, port: config.listen.port });
      if (config.metrics_listen) await metrics.listen(config.metrics_listen);
      // Once listening: a fleetgate that cannot take its port leaves no engines behind.
      launcher?.start();
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
      await Promise.all([fleet.stop(), dispatcher.close(), metrics.close(), launcher?.stop()]);
    },
  };

  registerServerGuards(app, config.limits.body_size);
  app.get('/metrics', async (_request, reply) => reply.type(metrics.contentType).send(await metrics.render()));
  registerModelsRoute(app, registry, () => gateway.config);
  await registerAdminRoutes(app, gateway, opts);
  registerTrafficRoutes(app, {
    config: () => gateway.config,
    dispatcher,
    contextOf: createContextReader({
      traitsOf: createTraitsReader(config.queue),
      admission: createModelAdmission(models, queue),
      promptTraits: prefixAware ? (path, headers, body) => promptTraits(path, headers, body, traitsOptions) : undefined,
      watchStreams: () => fleet.watchdog.enabled,
    }),
    events,
    closing: () => closing,
    retryAfterSeconds: Math.max(1, Math.ceil(config.health.starting_interval / 1000)),
  });

  return gateway;
}
