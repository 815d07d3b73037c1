/**
 * `kv-aware`: send a request where the engines' own KV-cache events (fleet/kv-events) say the
 * longest run of its leading blocks is cached, unless that backend is overloaded next to the
 * least-loaded one (prefix-aware's guard for sessions: past `load_gap` and `load_ratio`, and no idle
 * slot of its own).
 * Unlike prefix-aware's record of what this replica sent, the map is what the engines hold, and every
 * replica subscribed to the same engines holds the same one: they agree without sharing anything.
 *
 * A match moves a request off the least-loaded backend only when it saves prefill: the best run
 * must exceed the least-loaded one's by `min_match` of what the least-loaded would prefill. Where
 * the least-loaded holds the longest run too (a system prompt every backend holds: a new
 * conversation), the least loaded of its holders takes it, which spreads new conversations by load
 * (prefix-aware's record of sends piled them onto a few backends in bench:prefix). Ties go by
 * rendezvous score of the request's key, the same on every replica. Everything else is the
 * fallback's (prefix-aware, or least-loaded under `routing.policy: auto`): requests without block
 * keys (no model known, no prompt, past `tokenize_wait`), while no backend's events are live, a
 * prompt no backend holds a block of, a gain under `min_match`; stale or off backends get no
 * preference from the map and are routed by the fallback as without events.
 *
 * Decisions: `cache` (the map decided), `load` (the guard overrode it), `none` (no gain: the fallback
 * placed it), `fallback` (no keys or no live events).
 */
import type { PromptTraits } from '../request-traits.js';
import type { Candidate, Policy } from './policy-contract.js';
import { score } from './rendezvous.js';

/** What the policy reads of the fleet's KV-event map (fleet/kv-events/kv-events.ts implements it). */
export interface KvCacheView {
  /** Whether any backend's events are live now. */
  readonly anyLive: boolean;
  /** Leading blocks of `keys` held per live backend; absent: none, or not live. */
  leadingRuns(keys: readonly number[]): ReadonlyMap<string, number>;
  /** Tokens per block of the keys (null until known). */
  readonly blockSize: number | null;
}

export interface KvAwareOptions {
  minMatch: number;
  loadGap: number;
  loadRatio: number;
}

export type KvDecision = 'cache' | 'load' | 'none' | 'fallback';

/** Told of each pick: its decision and the prompt tokens the chosen backend holds. */
export type KvRouted = (decision: KvDecision, hitTokens: number) => void;

export class KvAware implements Policy {
  readonly #opts: KvAwareOptions;
  readonly #view: KvCacheView;
  readonly #fallback: Policy;
  readonly #leastLoaded: Policy;
  readonly #routed: KvRouted;

  constructor(opts: KvAwareOptions, view: KvCacheView, fallback: Policy, leastLoaded: Policy, routed: KvRouted) {
    this.#opts = opts;
    this.#view = view;
    this.#fallback = fallback;
    this.#leastLoaded = leastLoaded;
    this.#routed = routed;
  }

  pick<C extends Candidate>(candidates: readonly C[], traits?: PromptTraits, pool?: readonly Candidate[]): C {
    const keys = traits?.kvKeys;
    if (keys === undefined || keys.length === 0 || !this.#view.anyLive) {
      this.#routed('fallback', 0);
      return this.#fallback.pick(candidates, traits, pool);
    }
    const runs = this.#view.leadingRuns(keys);
    const blockSize = this.#view.blockSize ?? 0;
    const least = this.#leastLoaded.pick(candidates);
    const leastRun = runs.get(least.name) ?? 0;
    let best = 0;
    for (const candidate of candidates) best = Math.max(best, runs.get(candidate.name) ?? 0);
    const gain = best - leastRun;
    if (best === 0 || (gain > 0 && gain < this.#opts.minMatch * (keys.length - leastRun))) {
      const picked = this.#fallback.pick(candidates, traits, pool);
      this.#routed('none', (runs.get(picked.name) ?? 0) * blockSize);
      return picked;
    }
    // Among the backends holding the longest run: the least loaded, ties by the key's rendezvous
    // score (the same order on every replica).
    const key = traits?.key ?? keys[0];
    let chosen: C | null = null;
    let chosenScore = -1;
    for (const candidate of candidates) {
      if ((runs.get(candidate.name) ?? 0) !== best) continue;
      const s = score(key, candidate.name);
      if (chosen === null || candidate.load < chosen.load || (candidate.load === chosen.load && s > chosenScore)) {
        chosen = candidate;
        chosenScore = s;
      }
    }
    const picked = chosen as C;
    if (this.#overloaded(picked, least)) {
      this.#routed('load', leastRun * blockSize);
      return least;
    }
    this.#routed('cache', best * blockSize);
    return picked;
  }

  onDispatch(candidate: Candidate, traits?: PromptTraits): void {
    this.#fallback.onDispatch?.(candidate, traits);
  }

  affinity(candidate: Candidate, traits?: PromptTraits, pool?: readonly Candidate[]): boolean {
    const keys = traits?.kvKeys;
    if (keys === undefined || keys.length === 0 || !this.#view.anyLive)
      return this.#fallback.affinity?.(candidate, traits, pool) ?? false;
    const runs = this.#view.leadingRuns(keys);
    const own = runs.get(candidate.name) ?? 0;
    let others = 0;
    for (const other of pool ?? [])
      if (other.name !== candidate.name) others = Math.max(others, runs.get(other.name) ?? 0);
    return own > others && own - others >= this.#opts.minMatch * (keys.length - others);
  }

  /** The policy for what the map does not decide (prefix-aware's record, for its metrics). */
  get fallback(): Policy {
    return this.#fallback;
  }

  forget(name: string): void {
    this.#fallback.forget?.(name);
  }

  /**
   * prefix-aware's guard for a session's backend: past both thresholds, unless it has an idle batch
   * slot (it starts the request at once). A match that decides is at least `min_match` of what the
   * least-loaded would prefill, most often a conversation's history: moving it for an idle slot
   * elsewhere prefills that history again, which bench:prefix measured costing more than the wait.
   */
  #overloaded(candidate: Candidate, least: Candidate): boolean {
    if (candidate.idleSlot === true) return false;
    const gap = candidate.load - least.load;
    return gap > this.#opts.loadGap && candidate.load > least.load * this.#opts.loadRatio;
  }
}
