/**
 * The picking policies that read only load: least-loaded, round-robin and power-of-two. Each gets
 * the ready candidates that have a free slot and only reads them; none filters health itself.
 * prefix-aware (prefix-aware.ts) also reads the request; create-policy.ts registers them all.
 */
import type { Candidate, Policy } from './policy-contract.js';

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

export class RoundRobin implements Policy {
  #next = 0;

  pick<C extends Candidate>(candidates: readonly C[]): C {
    const picked = candidates[this.#next % candidates.length];
    this.#next = (this.#next + 1) % 1_000_000_007;
    return picked;
  }
}

/** Two random candidates, the less loaded wins (Mitzenmacher's power of two choices). */
export class PowerOfTwo implements Policy {
  readonly #random: () => number;

  constructor(random: () => number) {
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
