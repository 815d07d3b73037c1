/**
 * `prefix-aware`: send a request where its prompt prefix is most likely cached, unless that backend
 * is overloaded next to the least-loaded one; then load wins. Cache affinity alone piles requests
 * onto one busy server (the hot spots of SGLang PRs #14305 and #14532), so the guard matters as much
 * as the match. Load is `Candidate.load`, which counts a request from its dispatch on.
 *
 * Decisions: `session` (the session key's backend), `cache` (longest match), `load` (the guard
 * overrode a match), `none` (nothing matched enough: least-loaded).
 *
 * Several replicas (`balanceFactor` > 0, the default): the per-process record above only sees what
 * this replica sent, so a conversation whose turns alternate between two replicas would move every
 * turn. Then a request with a prefix key (the session key, or its conversation's opening) goes where
 * rendezvous hashing with bounded loads says (rendezvous.ts), a function of the key, the ready
 * backends and their reported load, the same on every replica: `home` (the key's first choice) or
 * `bound` (its first choice was over the load bound: the next in the key's order). The record and the
 * sessions are still kept, but only observe: they feed `matchedChars` (how much of the prompt the
 * chosen backend was sent before) and nothing they say can move a request away from where the other
 * replicas would send it. `balanceFactor` 0 turns hashing off: the per-process rule alone decides,
 * which a single replica may prefer (it places new conversations by load, not by hash).
 */
import type { PromptTraits } from '../request-traits.js';
import type { Candidate, Policy } from './policy-contract.js';
import { PrefixRecord } from './prefix-record.js';
import { boundedPick, score } from './rendezvous.js';

export interface PrefixAwareOptions {
  /** Memory bound per backend, in blocks. */
  maxBlocks: number;
  /** A block not sent to a backend for this long is forgotten; 0 = never by age. */
  ttlMs: number;
  /** Least share (0..1) of the request's blocks that must match for the cache to decide. */
  minMatch: number;
  /** The matched backend is overloaded when its load exceeds the least load by more than `loadGap`... */
  loadGap: number;
  /** ...and is more than `loadRatio` times it. */
  loadRatio: number;
  /** Rendezvous hashing's load bound, (1 + eps); 0 = no hashing (one replica's own record decides). */
  balanceFactor: number;
  now: () => number;
}

export type PrefixDecision = 'session' | 'cache' | 'load' | 'none' | 'home' | 'bound';
export const PREFIX_DECISIONS: readonly PrefixDecision[] = ['session', 'cache', 'load', 'none', 'home', 'bound'];

export interface PrefixStats {
  readonly decisions: Readonly<Record<PrefixDecision, number>>;
  /** Characters of prefix matched on the chosen backend, summed over decisions. */
  readonly matchedChars: number;
}

/** The simulator's and a rough tokenizer's figure, to turn a KV pool in tokens into characters. */
const CHARS_PER_TOKEN = 4;
/** Sessions remembered; the least recently used are forgotten beyond this. */
const MAX_SESSIONS = 100_000;

interface Choice<C> {
  candidate: C;
  matched: number;
}

/**
 * A match would send the request to a backend that queues it while the least-loaded one has an idle
 * batch slot. The match saves prefill of what it adds; the queue costs the wait for a whole answer
 * to finish, and the idle slot stays idle. In a batch of prompts that share openings of different
 * lengths (bench:balance's job) such matches are small and pulled requests off the idle backends.
 * A session's backend is not asked this (`#overloaded`'s `spareIdle`): moving a conversation or
 * a group prefills all of it again.
 */
function takesIdleSlotAway(matched: Candidate, least: Candidate): boolean {
  return least.idleSlot === true && matched.idleSlot !== true;
}

export class PrefixAware implements Policy {
  readonly #opts: PrefixAwareOptions;
  readonly #records = new Map<string, PrefixRecord>();
  /** Session key -> backend name, least recently used first. */
  readonly #sessions = new Map<string, string>();
  /** least-loaded: the guard's fallback and the tie-breaker among equal matches. */
  readonly #leastLoaded: Policy;
  readonly #decisions: Record<PrefixDecision, number> = {
    session: 0,
    cache: 0,
    load: 0,
    none: 0,
    home: 0,
    bound: 0,
  };
  #matchedChars = 0;

  constructor(opts: PrefixAwareOptions, leastLoaded: Policy) {
    this.#opts = opts;
    this.#leastLoaded = leastLoaded;
  }

  get stats(): PrefixStats {
    return { decisions: this.#decisions, matchedChars: this.#matchedChars };
  }

  pick<C extends Candidate>(candidates: readonly C[], traits?: PromptTraits, pool?: readonly Candidate[]): C {
    if (this.#opts.balanceFactor > 0 && traits?.key !== undefined) {
      const { picked, home } = boundedPick(
        traits.key,
        candidates,
        pool ?? candidates,
        this.#opts.balanceFactor,
        traits.opening,
      );
      const matched =
        traits.prefix === undefined ? 0 : (this.#records.get(picked.name)?.match(traits.prefix, this.#opts.now()) ?? 0);
      return this.#decide(home ? 'home' : 'bound', picked, matched * (traits.blockChars ?? 0));
    }
    const least = this.#leastLoaded.pick(candidates);
    if (traits === undefined) return this.#decide('none', least, 0);
    const pinned = this.#pinned(candidates, traits);
    if (pinned !== null && !this.#overloaded(pinned, least, true)) return this.#decide('session', pinned, 0);
    const best = this.#longestMatch(candidates, traits, least);
    if (best === null) return this.#decide('none', least, 0);
    const chars = best.matched * (traits.blockChars ?? 0);
    if (this.#overloaded(best.candidate, least, false) || takesIdleSlotAway(best.candidate, least))
      return this.#decide('load', least, 0);
    return this.#decide('cache', best.candidate, chars);
  }

  onDispatch(candidate: Candidate, traits?: PromptTraits): void {
    if (traits === undefined) return;
    const now = this.#opts.now();
    if (traits.prefix !== undefined && traits.prefix.length > 0) {
      let record = this.#records.get(candidate.name);
      if (record === undefined) {
        record = new PrefixRecord({ maxBlocks: this.#opts.maxBlocks, ttlMs: this.#opts.ttlMs });
        this.#records.set(candidate.name, record);
      }
      const blockChars = traits.blockChars ?? 1;
      const capacity =
        candidate.kvTokens == null ? null : Math.floor((candidate.kvTokens * CHARS_PER_TOKEN) / blockChars);
      record.add(traits.prefix, now, capacity);
    }
    if (traits.session !== undefined) {
      this.#sessions.delete(traits.session);
      this.#sessions.set(traits.session, candidate.name);
      if (this.#sessions.size > MAX_SESSIONS) this.#sessions.delete(this.#sessions.keys().next().value as string);
    }
  }

  affinity(candidate: Candidate, traits?: PromptTraits, pool?: readonly Candidate[]): boolean {
    if (traits === undefined) return false;
    if (this.#opts.balanceFactor > 0 && traits.key !== undefined) {
      // Its home among the ready: the backend every replica would prefer for it.
      const key = traits.key;
      const own = score(key, candidate.name);
      return (pool ?? [candidate]).every((other) => other.name === candidate.name || score(key, other.name) < own);
    }
    if (traits.session !== undefined && this.#sessions.get(traits.session) === candidate.name) return true;
    const prefix = traits.prefix;
    if (prefix === undefined || prefix.length === 0) return false;
    const matched = this.#records.get(candidate.name)?.match(prefix, this.#opts.now()) ?? 0;
    return matched > 0 && matched >= this.#opts.minMatch * prefix.length;
  }

  /** The backend left rotation: whatever it cached is gone (a restart empties its cache). */
  forget(name: string): void {
    this.#records.delete(name);
    for (const [session, backend] of this.#sessions) if (backend === name) this.#sessions.delete(session);
  }

  /** Blocks recorded for a backend (tests, status). */
  recordSize(name: string): number {
    return this.#records.get(name)?.size ?? 0;
  }

  #pinned<C extends Candidate>(candidates: readonly C[], traits: PromptTraits): C | null {
    if (traits.session === undefined) return null;
    const name = this.#sessions.get(traits.session);
    return name === undefined ? null : (candidates.find((c) => c.name === name) ?? null);
  }

  /**
   * The candidate with the most leading blocks recorded (ties: least-loaded among them), if it
   * matches `minMatch` of the prompt more than the least-loaded one does: a prefix every backend
   * holds (a shared system prompt, a batch job's common opening) gains nothing and must not pull
   * requests off the least-loaded backend.
   */
  #longestMatch<C extends Candidate>(candidates: readonly C[], traits: PromptTraits, least: C): Choice<C> | null {
    const prefix = traits.prefix;
    if (prefix === undefined || prefix.length === 0) return null;
    const now = this.#opts.now();
    let matched = 0;
    const tied: C[] = [];
    for (const candidate of candidates) {
      const m = this.#records.get(candidate.name)?.match(prefix, now) ?? 0;
      if (m === 0 || m < matched) continue;
      if (m > matched) tied.length = 0;
      matched = m;
      tied.push(candidate);
    }
    if (matched === 0 || matched < this.#opts.minMatch * prefix.length) return null;
    if (tied.includes(least)) return { candidate: least, matched };
    const leastMatched = this.#records.get(least.name)?.match(prefix, now) ?? 0;
    if (matched - leastMatched < this.#opts.minMatch * prefix.length) return null;
    return { candidate: tied.length === 1 ? tied[0] : this.#leastLoaded.pick(tied), matched };
  }

  /**
   * Past both thresholds. `spareIdle`: a session's backend that has an idle batch slot is not
   * overloaded: it starts the request at once, and moving it would only prefill again the
   * conversation (or group) it caches. A match without a session gets no such pass: it may be a
   * shared opening (a system prompt) that only the first backends have seen yet, and spreading new
   * conversations by load is what keeps them from all starting on those.
   */
  #overloaded(candidate: Candidate, least: Candidate, spareIdle: boolean): boolean {
    if (spareIdle && candidate.idleSlot === true) return false;
    const gap = candidate.load - least.load;
    return gap > this.#opts.loadGap && candidate.load > least.load * this.#opts.loadRatio;
  }

  #decide<C extends Candidate>(decision: PrefixDecision, candidate: C, matchedChars: number): C {
    this.#decisions[decision]++;
    this.#matchedChars += matchedChars;
    return candidate;
  }
}
