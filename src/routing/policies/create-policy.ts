/**
 * The one map from a `routing.policy` name to its policy: every policy is built here, from the
 * config's settings and the injected randomness and clock (tests and the virtual-time benches pass theirs).
 */
import * as defaults from '../../config/defaults.js';
import type { PolicyName } from '../../config/types.js';
import { LeastLoaded, PowerOfTwo, RoundRobin } from './basic-policies.js';
import { KvAware, type KvCacheView, type KvRouted } from './kv-aware.js';
import type { Policy } from './policy-contract.js';
import { PrefixAware, type PrefixAwareOptions } from './prefix-aware.js';

export interface PolicyDeps {
  random: () => number;
  now?: () => number;
  /** prefix-aware's settings (`routing.prefix`); defaults where absent. */
  prefix?: Partial<Omit<PrefixAwareOptions, 'now'>>;
  /**
   * The engines' KV-event map, when fleetgate subscribes to them and knows the model's tokenizer;
   * null or absent: `kv-aware` is `prefix-aware` and `auto` is `least-loaded`.
   */
  kv?: { view: KvCacheView; routed?: KvRouted } | null;
}

function prefixAware(deps: PolicyDeps): PrefixAware {
  return new PrefixAware(
    {
      maxBlocks: defaults.DEFAULT_PREFIX_MAX_BLOCKS,
      ttlMs: defaults.DEFAULT_PREFIX_TTL,
      minMatch: defaults.DEFAULT_PREFIX_MIN_MATCH,
      loadGap: defaults.DEFAULT_PREFIX_LOAD_GAP,
      loadRatio: defaults.DEFAULT_PREFIX_LOAD_RATIO,
      balanceFactor: defaults.DEFAULT_PREFIX_BALANCE_FACTOR,
      ...deps.prefix,
      now: deps.now ?? (() => performance.now()),
    },
    new LeastLoaded(),
  );
}

/** kv-aware over `fallback`, with prefix-aware's guard settings; `fallback` itself without a map. */
function overKv(deps: PolicyDeps, fallback: Policy): Policy {
  const kv = deps.kv ?? null;
  if (kv === null) return fallback;
  return new KvAware(
    {
      minMatch: deps.prefix?.minMatch ?? defaults.DEFAULT_PREFIX_MIN_MATCH,
      loadGap: deps.prefix?.loadGap ?? defaults.DEFAULT_PREFIX_LOAD_GAP,
      loadRatio: deps.prefix?.loadRatio ?? defaults.DEFAULT_PREFIX_LOAD_RATIO,
    },
    kv.view,
    fallback,
    new LeastLoaded(),
    kv.routed ?? (() => {}),
  );
}

export const POLICIES: Record<PolicyName, (deps: PolicyDeps) => Policy> = {
  'least-loaded': () => new LeastLoaded(),
  'round-robin': () => new RoundRobin(),
  'power-of-two': (deps) => new PowerOfTwo(deps.random),
  'prefix-aware': (deps) => prefixAware(deps),
  'kv-aware': (deps) => overKv(deps, prefixAware(deps)),
  auto: (deps) => overKv(deps, new LeastLoaded()),
};

export function createPolicy(name: PolicyName, deps: PolicyDeps = { random: Math.random }): Policy {
  return POLICIES[name](deps);
}
