/**
 * Rendezvous (highest random weight) hashing with bounded loads: the one rule that lets several
 * fleetgate replicas send a prefix to the same backend with nothing shared but the request, the
 * membership and the backends' own load reports. Every backend gets a score from (key, its name);
 * the order of the scores is the prefix's own preference list, the same on every replica. A backend
 * leaving removes only its place in each list, so only the prefixes whose home it was move (and a
 * backend coming back takes back exactly those). The load bound is Mirrokni, Thorup and
 * Zadimoghaddam's (SODA 2018; HAProxy's `hash-balance-factor`): a backend may take the request while
 * its load is under ceil(factor x (total load + 1) / backends); the first one in the list under it
 * does. One exception, for continuous batching: a backend that reports an idle batch slot is never
 * over the bound, since a request there starts at once (and finds its cache), while moving it
 * re-prefills the whole conversation elsewhere. Without it, a report a scrape interval old (a
 * finished request still counted) would move a conversation at light load, where integer loads make
 * the bound tight (4 backends, one request running: the bound is 1). So the bound spreads what
 * queues, and at light load the hash alone places. An opening request (a conversation's first turn:
 * nothing cached anywhere to keep) asks for an idle slot the other replicas have probably not filled
 * since the report (`idleSlotFleetWide`): else N replicas meeting a burst of new prompts each fill
 * the same idle slots, by the hash alone, before the next report. Pure, no I/O.
 */

import { hashText, mix } from '../text-hash.js';

/** A backend's score for `key` (a prefix key from `hashText`); the highest is the key's home. */
export function score(key: number, name: string): number {
  return mix(hashText(name) ^ mix(key ^ 0x9e3779b9));
}

export interface Weighed {
  readonly name: string;
  readonly load: number;
  /** It reports an idle batch slot (backend-load.ts `hasIdleSlot`): never over the bound. */
  readonly idleSlot?: boolean;
  /** The same, counting this replica's dispatches since the report N times (an opening request's test). */
  readonly idleSlotFleetWide?: boolean;
}

/**
 * Load a backend must stay under to take one more request: ceil(factor x (total + 1) / n), over the
 * whole pool (`pool`: every ready backend serving the model, not only the ones with a free slot).
 * At least one backend is always under it, since their loads sum to less than n times it.
 */
export function loadBound(pool: readonly Weighed[], factor: number): number {
  let total = 0;
  for (const member of pool) total += member.load;
  return Math.ceil((factor * (total + 1)) / Math.max(1, pool.length));
}

/**
 * The backend that takes a request of prefix `key`: the first of `candidates` (those that may take
 * it now) in the key's order with an idle batch slot or a load under the bound; when none is (every free one is
 * loaded and the lighter ones are at their cap), the first in the order, which waits least long
 * where caps hold the rest. `home`: whether that is the key's first choice among `candidates`.
 */
export function boundedPick<M extends Weighed>(
  key: number,
  candidates: readonly M[],
  pool: readonly Weighed[],
  factor: number,
  opening = false,
): { picked: M; home: boolean } {
  const bound = loadBound(pool.length > 0 ? pool : candidates, factor);
  // One pass, no sort: the highest score overall, and the highest among those under the bound.
  let top = candidates[0];
  let topScore = -1;
  let under: M | null = null;
  let underScore = -1;
  for (const candidate of candidates) {
    const s = score(key, candidate.name);
    if (s > topScore || (s === topScore && candidate.name < top.name)) {
      top = candidate;
      topScore = s;
    }
    if (
      ((opening ? (candidate.idleSlotFleetWide ?? candidate.idleSlot) : candidate.idleSlot) === true ||
        candidate.load < bound) &&
      (s > underScore || (s === underScore && under !== null && candidate.name < under.name))
    ) {
      under = candidate;
      underScore = s;
    }
  }
  return under === null ? { picked: top, home: true } : { picked: under, home: under === top };
}
