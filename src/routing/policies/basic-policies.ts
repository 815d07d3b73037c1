/**
 * Picking policies. Each gets the ready candidates that have a free slot and only reads them;
 * none filters health itself. One map registers them all.
 */
import * as defaults from '../../config/defaults.js';
import type { PolicyName } from '../../config/types.js';
import type { Candidate, Policy } from './policy-contract.js';
import { PrefixAware, type PrefixAwareOptions } from './prefix-aware.js';

export type { Candidate, Policy } from './policy-contract.js';

export interface PolicyDeps {
  random: () => number;
  now?: () => number;
  /** prefix-aware's settings (`routing.prefix`); defaults where absent. */
  prefix?: Partial<Omit<PrefixAwareOptions, 'now'>>;
}

/**
 * Fewest load, where load is what the backend reports running and queued plus fleetgate's
 * dispatches since (`backendLoad` in backend-load.ts). A backend with an idle batch slot comes before any
 * without: continuous batching starts a request at once where a slot is free, and a request queued
 * on a faster GPU while a slower one leaves a slot idle costs the whole job that slot's work. A
 * slower GPU needs no extra weight: its answers take longer, so it holds more and gets fewer new
 * requests (weighting by observed ms per token was tried and dropped: bench/README, "Pace
 * weighting"). Ties go to the first tied backend after the previously picked one, so equal backends
 * share evenly instead of all requests landing on the first in the list.
 */
export class LeastLoaded implements Policy {
  #cursor = 0;

  pick<C extends Candidate>(candidates: readonly C[]): C {
    const n = candidates.length;
    const start = this.#cursor % n;
    let best = candidates[start];
    let bestIdle = best.idleSlot === true;
    let bestIndex = start;
    for (let step = 1; step < n; step++) {
      const index = (start + step) % n;
      const candidate = candidates[index];
      const idle = candidate.idleSlot === true;
      if (idle !== bestIdle && !idle) continue;
      if (idle !== bestIdle || candidate.load < best.load) {
        best = candidate;
        bestIdle = idle;
        bestIndex = index;
      }
    }
    this.#cursor = bestIndex + 1;
    return best;
  }
}

class RoundRobin implements Policy {
  #next = 0;

  pick<C extends Candidate>(candidates: readonly C[]): C {
    const picked = candidates[this.#next % candidates.length];
    this.#next = (this.#next + 1) % 1_000_000_007;
    return picked;
  }
}

/** Two random candidates, the less loaded wins (Mitzenmacher's power of two choices). */
class PowerOfTwo implements Policy {
  readonly #random: () => number;

  constructor({ random }: PolicyDeps) {
    this.#random = random;
  }

  pick<C extends Candidate>(candidates: readonly C[]): C {
    const n = candidates.length;
    if (n === 1) return candidates[0];
    const i = Math.floor(this.#random() * n);
    let j = Math.floor(this.#random() * (n - 1));
    if (j >= i) j++;
    const a = candidates[i];
    const b = candidates[j];
    return b.load < a.load ? b : a;
  }
}

export const POLICIES: Record<PolicyName, (deps: PolicyDeps) => Policy> = {
  'least-loaded': () => new LeastLoaded(),
  'round-robin': () => new RoundRobin(),
  'power-of-two': (deps) => new PowerOfTwo(deps),
  'prefix-aware': (deps) =>
    new PrefixAware(
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
    ),
};

export function createPolicy(name: PolicyName, deps: PolicyDeps = { random: Math.random }): Policy {
  return POLICIES[name](deps);
}
