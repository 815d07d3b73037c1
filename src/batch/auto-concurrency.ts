/**
 * How many requests a batch keeps in flight, from fleetgate's own view of the fleet
 * (`GET /fleet/status`) rather than a number the user guesses: the room of every ready backend
 * (its in-flight cap, which under `max_inflight_per_backend: auto` follows the engine's batch slots
 * and KV cache; uncapped, what it reports running and queued) plus a headroom that waits in
 * fleetgate's queue, so a freed slot is refilled at once from there instead of after a round trip
 * to this client. More would only lengthen fleetgate's queue (and the time to notice a cancel);
 * fewer leaves slots idle. With no backend ready it pauses: a request sent then would only wait
 * out the queue timeout.
 */

/** The part of `GET /fleet/status` this reads (admin/fleet-summary.ts `FleetStatus`). */
export interface FleetView {
  ready: number;
  total: number;
  waiting?: Record<string, number>;
  backends: Array<{
    state: string;
    inflight: number;
    inflight_cap: number | null;
    serving?: { running: number | null; queued: number | null };
  }>;
}

/** Room assumed for an uncapped backend that reports no load. */
export const UNCAPPED_ROOM = 32;
/** Share of the fleet's room kept waiting in fleetgate's queue. */
export const HEADROOM_SHARE = 0;
/** At least this many per ready backend wait there. */
export const HEADROOM_PER_BACKEND = 1;
export const MAX_AUTO_CONCURRENCY = 8192;

export function autoConcurrency(view: FleetView): number {
  let room = 0;
  let ready = 0;
  for (const backend of view.backends) {
    if (backend.state !== 'ready') continue;
    ready++;
    if (backend.inflight_cap !== null) room += backend.inflight_cap;
    else {
      const reported = (backend.serving?.running ?? 0) + (backend.serving?.queued ?? 0);
      room += Math.max(UNCAPPED_ROOM, reported, backend.inflight);
    }
  }
  if (ready === 0) return 0;
  const headroom = Math.max(HEADROOM_PER_BACKEND * ready, Math.ceil(room * HEADROOM_SHARE));
  return Math.min(MAX_AUTO_CONCURRENCY, room + headroom);
}

export interface ConcurrencyOptions {
  /** A fixed limit (`--concurrency N`), or null for auto. */
  fixed: number | null;
  fetchStatus: () => Promise<FleetView>;
  intervalMs?: number;
}

/** Polls the fleet's status; `limit()` is what the runner may have in flight now. */
export class ConcurrencyControl {
  readonly #opts: ConcurrencyOptions;
  #limit: number;
  #view: FleetView | null = null;
  #timer: NodeJS.Timeout | null = null;
  #polling = false;

  constructor(opts: ConcurrencyOptions) {
    this.#opts = opts;
    this.#limit = opts.fixed ?? 0;
  }

  /** Reads the status once (so the first requests go out sized), then every `intervalMs`. */
  async start(): Promise<void> {
    await this.poll();
    this.#timer = setInterval(() => void this.poll(), this.#opts.intervalMs ?? 1000);
    this.#timer.unref();
  }

  async poll(): Promise<void> {
    if (this.#polling) return;
    this.#polling = true;
    try {
      this.#view = await this.#opts.fetchStatus();
      if (this.#opts.fixed === null) this.#limit = autoConcurrency(this.#view);
    } catch {
      // fleetgate unreachable: keep the last limit; the requests say so themselves and wait.
    } finally {
      this.#polling = false;
    }
  }

  limit = (): number => this.#limit;

  /** The latest status read; null before the first. */
  get view(): FleetView | null {
    return this.#view;
  }

  stop(): void {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }
}

/** The class batch requests run in: `batch` if fleetgate has one, else its lowest; null: none known. */
export function batchClassOf(view: FleetView | null): string | null {
  const classes = Object.keys(view?.waiting ?? {});
  if (classes.includes('batch')) return 'batch';
  return classes.at(-1) ?? null;
}
