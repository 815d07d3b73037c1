/**
 * The composition root: builds a running fleetgate from its config, layer by layer (fleet, routing,
 * the traffic path, metrics, fleetgate's own endpoints), and starts and stops them in order. One
 * HTTP server and one fastify app: fleetgate's own endpoints, and on every other path the traffic
 * path (@fastify/http-proxy over the fleet dispatcher).
 */
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Logger } from 'pino';
import type { ControlPlane } from './admin/control-plane.js';
import type { ServingPhase } from './admin/probe-routes.js';
import { type ReloadOutcome, reload } from './admin/reload.js';
import { registerAdminRoutes } from './admin/routes.js';
import { type BatchService, type BatchServiceLog, createBatchService } from './batch/batch-service.js';
import type { Config } from './config/types.js';
import type { DnsResolver } from './fleet/dns-discovery.js';
import { Fleet } from './fleet/fleet.js';
import { logTransitions } from './fleet/transition-log.js';
import { createHttpServer } from './http/http-server.js';
import { frameworkErrorHandler, registerOwnErrorHandler } from './http/own-error-handler.js';
import { trackConnections } from './http/quiet-connections.js';
import { registerRequestBodies } from './http/request-body.js';
import { clientErrorHandler, refuseAbsoluteForm, refuseConnect } from './http/server-guards.js';
import { Launcher } from './launch/launcher.js';
import { GatewayMetrics } from './metrics/gateway-metrics.js';
import { registerKvMetrics } from './metrics/kv-metrics.js';
import { ServingStats } from './metrics/serving-stats.js';
import { registerUpstreamConnections } from './metrics/upstream-connections.js';
import { attachAccessLog } from './proxy/access-log.js';
import { createPriorityStamp } from './proxy/backend-priority.js';
import { withKvKeys } from './proxy/kv-prompt-traits.js';
import { createKvRouting, type KvRouting } from './proxy/kv-routing.js';
import { createModelAdmission } from './proxy/model-admission.js';
import { tokenResumeFrom } from './proxy/model-tokens.js';
import { registerModelsRoute } from './proxy/models-route.js';
import { ProxyEventBus } from './proxy/proxy-events.js';
import { createContextReader } from './proxy/request-context-from.js';
import { createTraitsReader } from './proxy/request-traits-from.js';
import { registerTrafficRoutes } from './proxy/traffic-routes.js';
import { FleetDispatcher } from './routing/dispatch/fleet-dispatcher.js';
import { UpstreamPools } from './routing/dispatch/upstream-pools.js';
import { createCapController, createRouting } from './routing/fleet-routing.js';
import { queuesOwnRequests } from './routing/load/backend-load.js';
import type { CapController } from './routing/load/cap-controller.js';
import type { ModelRouter } from './routing/model-route.js';
import type { ModelQueues } from './routing/queue/model-queues.js';
import { promptTraits } from './routing/request-traits.js';
import { createTracing } from './tracing/create-tracing.js';
import type { Tracing } from './tracing/tracing.js';
import { warmUp } from './warm-up/warm-up.js';

/** While a close waits for the requests in flight, connections with none are closed this often. */
const QUIET_SWEEP_MS = 250;

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
  /** Sets each backend's cap from its load reports under `max_inflight_per_backend: auto`; else null. */
  readonly caps: CapController | null;
  readonly events: ProxyEventBus;
  readonly metrics: GatewayMetrics;
  /** The serving view (`/fleet`, `fleetgate status`), sampled once a second. */
  readonly serving: ServingStats;
  /** The engines' supervisor under `fleetgate launch`; null under `serve`. */
  readonly launcher: Launcher | null;
  /** The Batch API's jobs; null with `batch.enabled: false`. */
  readonly batch: BatchService | null;
  /** The running config; a reload changes its live keys in place. */
  readonly config: Config;
  /** Re-reads the config and applies it (`POST /fleet/reload`, SIGHUP); null without `reloadConfig`. */
  readonly reload: (() => ReloadOutcome) | null;
  /** Listens on `config.listen` (and `metrics_listen`); returns the bound main URL. */
  listen(): Promise<string>;
  /** Stops accepting, lets in-flight requests finish up to `shutdown.grace`, then closes. */
  close(): Promise<void>;
  /**
   * SIGTERM: `/readyz` answers 503 at once while the listener stays open (a request that still
   * arrives is served), waits for every request in flight or queued to finish, then closes; all of
   * it within `shutdown.grace`, after which what remains is cut.
   */
  drain(): Promise<void>;
}

/**
 * Builds fleetgate, lowest layer first: the fleet, routing, the traffic path's dispatcher, metrics,
 * then one fastify app with, in order, fleetgate's own endpoints, the Batch API and the traffic
 * path. `listen`, `drain` and `close` (in `lifecycle`) start and stop the parts in one place.
 */
export async function createGateway(config: Config, opts: GatewayOptions): Promise<Gateway> {
  const { logger, now, logPollMs, resolver } = opts;
  const fleet = new Fleet(config, { now, logPollMs, resolver, logger, hasOwnQueue: queuesOwnRequests });
  const registry = fleet.registry;
  logTransitions(logger, registry);
  const launcher =
    opts.launch && config.launch !== null
      ? new Launcher({ config: config.launch, registry, logger, now: opts.now })
      : null;
  const kv = createKvRouting(config, registry, (line) => logger.warn(line));
  const routing = createRouting(config, registry, kvPolicyView(kv));
  const caps = createCapController(config, registry);
  const events = new ProxyEventBus();
  if (config.log.access) attachAccessLog(logger, events);
  const pools = new UpstreamPools(registry, config.upstream);
  const dispatcher = createDispatcher(config, fleet, routing.queue, pools, events);
  const metrics = new GatewayMetrics(registry, events, routing.queue, routing.prefix, config.routing.replicas);
  const tokenLatency = config.metrics.token_latency ? metrics.tokenLatency : undefined;
  if (tokenLatency === undefined) events.tokens = null;
  registerUpstreamConnections(metrics.registry, registry, () => pools.connections());
  const state = new ServingState(config.upstream.warm_up);

  const app = createApp(config, logger);
  if (kv !== null) startKvEvents(kv, metrics, app);
  app.get('/metrics', async (_request, reply) => reply.type(metrics.contentType).send(await metrics.render()));
  registerModelsRoute(app, registry, () => config);
  const reloadConfig = opts.reloadConfig;
  const control: ControlPlane = {
    fleet,
    config,
    supervisorOf: (name) => launcher?.get(name),
    reload: reloadConfig ? () => reload(fleet, config, reloadConfig, launcher) : null,
  };
  const stats = new ServingStats({ registry, events, waiting: () => routing.queue.waiting, latency: tokenLatency });
  await registerOwnEndpoints(app, control, stats, routing.queue, () => state.phase);
  const tracing = await createTracing(config.tracing);
  const batch = await createBatchService(app, config, batchLog(logger), tracing);
  if (batch) metrics.observeBatches(batch.jobs);
  registerTraffic(app, config, { fleet, routing, dispatcher, events, tracing, kv }, () => state.closing);

  const warmUpCopy = (copy: Config) =>
    createGateway(copy, { logger: logger.child({}, { level: 'silent' }), now: opts.now });
  const tokenizerLoaded = () => kv?.keys.ready() ?? Promise.resolve();
  const parts = { app, fleet, routing, caps, dispatcher, metrics, launcher, batch, logger, state, tracing };
  return {
    app,
    fleet,
    queue: routing.queue,
    models: routing.models,
    caps,
    events,
    metrics,
    serving: stats,
    launcher,
    batch,
    config,
    reload: control.reload,
    ...lifecycle(config, { ...parts, warmUpCopy, tokenizerLoaded }),
  };
}

/** What the kv-aware policy reads of the engines' KV events, when they are configured. */
function kvPolicyView(kv: KvRouting | null) {
  // `routed` is read per call: the metrics replace it once registered.
  const routed: KvRouting['routed'] = (decision, hit) => kv?.routed(decision, hit);
  return kv === null ? null : { view: kv.events, routed };
}

/** The KV-event subscriptions start with the app, their metrics registered, and close with it. */
function startKvEvents(kv: KvRouting, metrics: GatewayMetrics, app: FastifyInstance): void {
  registerKvMetrics(metrics.registry, kv);
  kv.events.start();
  app.addHook('onClose', async () => {
    await kv.events.close();
    await kv.keys.close();
  });
}

/** What `/readyz` reports of the process itself, and whether the traffic path still takes requests. */
class ServingState {
  phase: ServingPhase;
  closing = false;

  constructor(warmUp: boolean) {
    this.phase = warmUp ? 'warming' : 'serving';
  }
}

function createDispatcher(
  config: Config,
  fleet: Fleet,
  queue: ModelQueues,
  pools: UpstreamPools,
  events: ProxyEventBus,
): FleetDispatcher {
  return new FleetDispatcher({
    registry: fleet.registry,
    queue: queue.any,
    pools,
    retries: config.routing.retries,
    observer: {
      failed: (backend, failure) => events.emit('upstream_error', { backend: backend.name, kind: failure.kind }),
      retried: (backend) => events.emit('retry', { backend: backend.name }),
    },
    watchdog: fleet.watchdog,
    drains: fleet.drains,
  });
}

function batchLog(logger: Logger): BatchServiceLog {
  return {
    jobError: (id, err) => logger.error({ err, batch: id }, 'batch job failed'),
    warn: (message) => logger.warn(message),
  };
}

/**
 * One fastify app on fleetgate's HTTP server, with the server-level refusals and error answers, and
 * how its own routes read a body (an empty JSON body is none: `http/request-body.ts`).
 */
function createApp(config: Config, logger: Logger): FastifyInstance {
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    // fleetgate writes its own access log (one line per proxied request, with backend and retries).
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: config.limits.body_size,
    forceCloseConnections: 'idle',
    // Bad requests, header overflow and slow headers get an OpenAI-style error like every other one.
    clientErrorHandler,
    frameworkErrors: frameworkErrorHandler,
    serverFactory: (handler) => createHttpServer(config.limits, handler),
  });
  refuseConnect(app.server);
  refuseAbsoluteForm(app);
  registerOwnErrorHandler(app, config.limits.body_size);
  registerRequestBodies(app);
  return app;
}

/** Probes, `/fleet` status, events and page, and the admin API, with the serving view they show. */
async function registerOwnEndpoints(
  app: FastifyInstance,
  control: ControlPlane,
  stats: ServingStats,
  queue: ModelQueues,
  phase: () => ServingPhase,
): Promise<void> {
  app.addHook('onReady', async () => stats.start());
  app.addHook('onClose', async () => stats.stop());
  await registerAdminRoutes(app, control, { stats, queue }, phase);
}

interface TrafficParts {
  fleet: Fleet;
  routing: ReturnType<typeof createRouting>;
  dispatcher: FleetDispatcher;
  events: ProxyEventBus;
  tracing: Tracing | null;
  kv: KvRouting | null;
}

/** The traffic path on every path not registered before it. */
function registerTraffic(
  app: FastifyInstance,
  config: Config,
  { fleet, routing, dispatcher, events, tracing, kv }: TrafficParts,
  closing: () => boolean,
): void {
  const prefix = config.routing.prefix;
  const traitsOptions = { blockChars: prefix.block_chars, sessionHeader: prefix.session_header?.toLowerCase() ?? null };
  registerTrafficRoutes(app, {
    config: () => config,
    dispatcher,
    contextOf: createContextReader({
      traitsOf: createTraitsReader(config.queue),
      admission: createModelAdmission(routing.models, routing.queue),
      promptTraits: withKvKeys(
        routing.prefix !== null ? (path, headers, body) => promptTraits(path, headers, body, traitsOptions) : undefined,
        kv,
      ),
      watchStreams: () => fleet.watchdog.enabled,
    }),
    events,
    closing,
    retryAfterSeconds: Math.max(1, Math.ceil(config.health.starting_interval / 1000)),
    stampPriority: createPriorityStamp(config.queue.classes),
    tracing,
    tokenResume: tokenResumeFrom(config.model, (name) => fleet.registry.get(name)?.config.kind ?? config.kind),
  });
}

interface Parts {
  app: FastifyInstance;
  fleet: Fleet;
  routing: ReturnType<typeof createRouting>;
  caps: CapController | null;
  dispatcher: FleetDispatcher;
  metrics: GatewayMetrics;
  launcher: Launcher | null;
  batch: BatchService | null;
  logger: Logger;
  state: ServingState;
  warmUpCopy: (config: Config) => Promise<Gateway>;
  tracing: Tracing | null;
  /** kv-aware's tokenizer workers have loaded the model (at once without them). */
  tokenizerLoaded: () => Promise<void>;
}

/**
 * The order of start and stop. Start: probes, the listener, the warm-up, the metrics listener, the
 * engines (only once the port is taken), the batch jobs. Stop: the warm-up, the batch jobs (their
 * requests to this listener would hold the drain), the queues, the listener, then the rest at once.
 */
function lifecycle(config: Config, parts: Parts): Pick<Gateway, 'listen' | 'close' | 'drain'> {
  const { app, fleet, routing, caps, dispatcher, metrics, launcher, batch, logger, state, tracing } = parts;
  const connections = trackConnections(app.server);
  const stopWarmUp = new AbortController();
  let warming: Promise<void> = Promise.resolve();

  // kv-aware's first requests would go unkeyed while its tokenizer loads (~1 s): the warm-up waits for it too.
  async function warmUpThenServe(): Promise<void> {
    const [result] = await Promise.all([warmUp(config, parts.warmUpCopy, stopWarmUp.signal), parts.tokenizerLoaded()]);
    if (result.error !== null) logger.warn({ warmUp: result }, 'start-up warm-up incomplete; serving cold');
    else logger.info({ warmUp: result }, 'start-up warm-up done');
    metrics.warmedUp(result.ms / 1000);
    if (state.phase === 'warming') state.phase = 'serving';
  }

  async function close(graceMs: number): Promise<void> {
    state.closing = true;
    stopWarmUp.abort();
    await warming;
    await batch?.stop();
    const server = app.server;
    const force = setTimeout(() => server.closeAllConnections(), graceMs);
    force.unref();
    const sweep = setInterval(() => connections.closeQuiet(), QUIET_SWEEP_MS);
    sweep.unref();
    routing.queue.close();
    caps?.stop();
    await app.close();
    clearTimeout(force);
    clearInterval(sweep);
    await Promise.all([fleet.stop(), dispatcher.close(), metrics.close(), launcher?.stop(), tracing?.shutdown()]);
  }

  return {
    listen: async () => {
      fleet.start();
      const address = await app.listen({ host: config.listen.host, port: config.listen.port });
      if (state.phase === 'warming') warming = warmUpThenServe();
      if (config.metrics_listen) await metrics.listen(config.metrics_listen);
      launcher?.start();
      batch?.start((app.server.address() as { port: number }).port);
      return address;
    },
    close: () => close(config.shutdown.grace),
    drain: async () => {
      const deadline = performance.now() + config.shutdown.grace;
      state.phase = 'draining';
      metrics.draining();
      await batch?.stop();
      await untilIdle(fleet.registry, routing.queue, config.shutdown.grace);
      await close(Math.max(0, deadline - performance.now()));
    },
  };
}

/** Resolves once no request is in flight to a backend or waiting in the queues, or after `timeoutMs`. */
function untilIdle(registry: Fleet['registry'], queue: ModelQueues, timeoutMs: number): Promise<void> {
  const idle = () => queue.waiting === 0 && registry.list().every((backend) => backend.inflight === 0);
  if (idle()) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      registry.off('capacity', check);
      resolve();
    };
    const check = () => {
      if (idle()) done();
    };
    const timer = setTimeout(done, timeoutMs);
    registry.on('capacity', check);
  });
}
