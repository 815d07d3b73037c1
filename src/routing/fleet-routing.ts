/**
 * Routing for a fleet, built from the config: the picking policy, one wait queue per model pool
 * (and one for a single-model fleet), the model router, and their wiring to the registry. The cap
 * controller of `max_inflight_per_backend: auto` is built beside it, in app.ts.
 */
import type { Config } from '../config/types.js';
import type { FleetRegistry } from '../fleet/registry.js';
import { CapController } from './load/cap-controller.js';
import { ModelRouter } from './model-route.js';
import { createPolicy } from './policies/create-policy.js';
import type { KvCacheView, KvRouted } from './policies/kv-aware.js';
import { PrefixAware } from './policies/prefix-aware.js';
import { queueClassOptions } from './queue/classes-from-config.js';
import { ModelQueues } from './queue/model-queues.js';
import { drainOnCapacity } from './queue/registry-wiring.js';
import { WaitQueue } from './queue/wait-queue.js';

export interface FleetRouting {
  /** The wait queues: one per model pool, and one for a single-model fleet. */
  readonly queue: ModelQueues;
  readonly models: ModelRouter;
  /** prefix-aware's record of what each backend caches; null under the other policies. */
  readonly prefix: PrefixAware | null;
}

/** The engines' KV-event map for `kv-aware` and `auto` (null: none; they fall back, app.ts says so). */
export interface RoutingKv {
  readonly view: KvCacheView;
  readonly routed?: KvRouted;
}

/** Policies that keep one record for the fleet, shared by the model queues. */
const SHARED: ReadonlySet<string> = new Set(['prefix-aware', 'kv-aware']);

export function createRouting(config: Config, registry: FleetRegistry, kv: RoutingKv | null = null): FleetRouting {
  const prefix = config.routing.prefix;
  const newPolicy = () =>
    createPolicy(config.routing.policy, {
      random: Math.random,
      prefix: {
        maxBlocks: prefix.max_blocks,
        ttlMs: prefix.ttl,
        minMatch: prefix.min_match,
        loadGap: prefix.load_gap,
        loadRatio: prefix.load_ratio,
        balanceFactor: prefix.balance_factor,
      },
      kv,
    });
  // prefix-aware keeps one record of what each backend caches, shared by the model queues (a backend
  // serves one model); the other policies get one instance per model (round-robin's cursor).
  const sharedPolicy = SHARED.has(config.routing.policy) ? newPolicy() : null;
  const fleetWide = capsAreFleetWide(config);
  const queue = new ModelQueues({
    make: (ready) =>
      new WaitQueue({
        maxWaiting: config.queue.max_waiting,
        ...queueClassOptions(config),
        ready,
        policy: sharedPolicy ?? newPolicy(),
        affinityLookahead: prefix.queue_lookahead,
        affinityHoldMs: prefix.queue_hold,
        slots: registry,
        fleetWideCap: fleetWide,
        replicas: config.routing.replicas,
      }),
    ready: () => registry.ready,
    serving: (model) => registry.readyServing(model),
  });
  // A freed slot may serve a waiter of any queue its backend belongs to, hence all are drained.
  drainOnCapacity(registry, queue);
  registry.on('transition', ({ backend, to }) => {
    if (to !== 'ready') sharedPolicy?.forget?.(backend.name);
  });
  registry.on('removed', (backend) => sharedPolicy?.forget?.(backend.name));

  const models = new ModelRouter({ aliases: config.models, defaultModel: config.default_model });
  registry.on('models', () => models.setPools(registry.models()));
  registry.on('removed', () => models.setPools(registry.models()));
  return { queue, models, prefix: prefixOf(sharedPolicy) };
}

/** A cap (fixed or auto) counts every replica's requests where the backends report their load. */
function capsAreFleetWide(config: Config): boolean {
  return config.routing.cap_scope === 'fleet' && config.routing.load_interval > 0;
}

/** The adaptive cap's controller for `max_inflight_per_backend: auto`, else null; app.ts builds it once. */
export function createCapController(config: Config, registry: FleetRegistry): CapController | null {
  if (config.routing.max_inflight_per_backend !== 'auto') return null;
  return new CapController({
    registry,
    scraping: config.routing.load_interval > 0,
    slowStart: config.routing.cap_slow_start,
    fleetWide: capsAreFleetWide(config),
  });
}

/** prefix-aware's record: the policy itself, or kv-aware's fallback. */
function prefixOf(policy: unknown): PrefixAware | null {
  if (policy instanceof PrefixAware) return policy;
  const fallback = (policy as { fallback?: unknown } | null)?.fallback;
  return fallback instanceof PrefixAware ? fallback : null;
}
