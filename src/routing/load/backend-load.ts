/**
 * The load routing compares, from what the registry counts on a backend: its in-flight requests
 * and its latest load report. Policies see a backend through `candidateOf`.
 */
import type { Backend, ReportedLoad } from '../../fleet/registry.js';
import type { Candidate } from '../policies/policy-contract.js';

/** Requests a backend may hold in its own queue beyond what it runs: fewer are arrivals between two scheduler steps. */
export const QUEUE_ALLOWANCE = 2;

export interface LoadFacts {
  readonly inflight: number;
  readonly reported: ReportedLoad | null;
}

/**
 * What the backend reported running and queued, plus fleetgate's net dispatches since that report;
 * just the in-flight count where the backend reports nothing. `replicas` (`routing.replicas`): the
 * fleetgate replicas that send to it alike. Between two reports a replica sees only its own
 * dispatches; behind a round-robin Service the others sent about as many, so each dispatch since
 * counts N times. Its requests that ended since count once: the others' endings are not assumed.
 * Its requests in flight at the scrape beyond what the backend reported were still on the wire (or
 * in its tokenizer): counted by no report yet, they count as sent since, N times, since the others
 * had about as many on the wire. Without that, N replicas whose requests were all still on the wire
 * at their scrapes each fall back to their own in-flight count and together hold N caps.
 */
export function backendLoad(backend: LoadFacts, replicas = 1): number {
  const reported = backend.reported;
  if (reported === null) return backend.inflight;
  const held = reported.running + reported.queued;
  const sent = backend.inflight - Math.min(reported.inflightAtScrape, held);
  const current = held + (sent > 0 ? sent * replicas : sent);
  return Math.max(current, backend.inflight);
}

/**
 * It reports idle batch slots: fewer running than its `max_running_requests`, and no real queue.
 * A request waiting at a scrape is an arrival between two scheduler steps, not a backend that
 * cannot admit (its KV cache full): taking it for one would count every busy fast GPU as full for
 * a whole load interval. The queue is the report's less fleetgate's requests that ended since
 * (`ownQueue`): a report of two arrivals, both answered by now, says nothing about the backend now.
 */
export function hasIdleSlot(backend: LoadFacts, replicas = 1): boolean {
  const reported = backend.reported;
  return (
    reported !== null &&
    reported.maxRunning !== null &&
    ownQueue(backend) < QUEUE_ALLOWANCE &&
    backendLoad(backend, replicas) < reported.maxRunning
  );
}

/** It holds a real queue of its own (the progress watchdog then expects it to make progress). */
export function queuesOwnRequests(backend: LoadFacts): boolean {
  return (backend.reported?.queued ?? 0) >= QUEUE_ALLOWANCE;
}

/**
 * Requests waiting in the backend's own queue, as far as fleetgate can tell: what it reported, less
 * one for each of fleetgate's requests on it that ended since (each freed a place its queue's head
 * took). 0 where it reports nothing.
 */
export function ownQueue(backend: LoadFacts): number {
  const reported = backend.reported;
  if (reported === null) return 0;
  return Math.max(0, reported.queued + Math.min(0, backend.inflight - reported.inflightAtScrape));
}

/** A backend as a policy sees it. */
export class RoutedBackend implements Candidate {
  readonly backend: Backend;
  readonly #replicas: number;
  constructor(backend: Backend, replicas: number) {
    this.backend = backend;
    this.#replicas = replicas;
  }
  get name(): string {
    return this.backend.name;
  }
  get load(): number {
    return backendLoad(this.backend, this.#replicas);
  }
  get idleSlot(): boolean {
    return hasIdleSlot(this.backend);
  }
  get idleSlotFleetWide(): boolean {
    return hasIdleSlot(this.backend, this.#replicas);
  }
  get ownQueue(): number {
    return ownQueue(this.backend);
  }
  /** Its KV pool in tokens, when reported: how much of a prompt record it can still hold. */
  get kvTokens(): number | null {
    return this.backend.reported?.kvTokens ?? null;
  }
}

/** One view per backend, made once (admission builds candidate lists per request), all with one `replicas`. */
export class RoutedViews {
  readonly #views = new WeakMap<Backend, RoutedBackend>();
  readonly #replicas: number;
  constructor(replicas = 1) {
    this.#replicas = replicas;
  }
  of(backend: Backend): RoutedBackend {
    let view = this.#views.get(backend);
    if (view === undefined) {
      view = new RoutedBackend(backend, this.#replicas);
      this.#views.set(backend, view);
    }
    return view;
  }
}
