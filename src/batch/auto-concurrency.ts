/**
 * How many requests a batch keeps in flight, from fleetgate's own view of the fleet
 * (`GET /fleet/status`) rather than a number the user guesses: the room of every ready backend
 * (its in-flight cap, which under `max_inflight_per_backend: auto` follows the engine's batch slots
 * and KV cache; uncapped, what it reports running and queued), each counted at the most it has
 * shown during the run, plus one request per ready backend waiting in fleetgate's queue, so a freed
 * slot is refilled at once from there instead of after a round trip to this client.
 *
 * Why the most, not the room now: an adaptive cap closes while the backend's KV cache is full and
 * opens again by a quarter at each load report (every 250 ms by default), four times between two
 * reads of the status here. A limit that followed the cap down would leave the slots it reopens
 * idle until the next read (docs/benchmarks.md, "bench:batch", compares the two rules);
 * the requests above the cap wait in fleetgate's queue, where they cost the engines nothing and
 * interactive requests overtake them. A backend not ready is not counted. More would only
 * lengthen fleetgate's queue (and the time to notice a cancel); fewer leaves slots idle. With no
 * backend ready it pauses: a request sent then would only wait out the queue timeout.
 */

/** The part of `GET /fleet/status` this reads (admin/fleet-summary.ts `FleetStatus`). */
export interface FleetView {
  ready: number;
  total: number;
  waiting?: Record<string, number>;
  backends: Array<{
    name: string;
    state: string;
    inflight: number;
    inflight_cap: number | null;
    serving?: { running: number | null; queued: number | null };
  }>;
}

/** Room assumed for an uncapped backend that reports no load. */
export const UNCAPPED_ROOM = 32;
/** Requests per ready backend that wait in fleetgate's queue. */
const HEADROOM_PER_BACKEND = 1;
const MAX_AUTO_CONCURRENCY = 8192;

type BackendView = FleetView['backends'][number];

/** What a ready backend can take now: its cap, or uncapped what it reports (at least `UNCAPPED_ROOM`). */
function roomNow(backend: BackendView): number {
  if (backend.inflight_cap !== null) return backend.inflight_cap;
  const reported = (backend.serving?.running ?? 0) + (backend.serving?.queued ?? 0);
  return Math.max(UNCAPPED_ROOM, reported, backend.inflight);
}

/** The auto limit over one run: it remembers each backend's most room, by name. */
export class AutoConcurrency {
  readonly #most = new Map<string, number>();

  next(view: FleetView): number {
    let room = 0;
    let ready = 0;
    for (const backend of view.backends) {
      if (backend.state !== 'ready') continue;
      ready++;
      const most = Math.max(this.#most.get(backend.name) ?? 0, roomNow(backend));
      this.#most.set(backend.name, most);
      room += most;
    }
    if (ready === 0) return 0;
    return Math.min(MAX_AUTO_CONCURRENCY, room + HEADROOM_PER_BACKEND * ready);
  }
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
  readonly #auto = new AutoConcurrency();
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
      if (this.#opts.fixed === null) this.#limit = this.#auto.next(this.#view);
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

/** The class a batch's requests take among `names` (highest first): `batch` if there is one, else the lowest. */
export function batchClassAmong(names: readonly string[]): string | null {
  return names.includes('batch') ? 'batch' : (names.at(-1) ?? null);
}

/** The class batch requests run in: `batch` if fleetgate has one, else its lowest; null: none known. */
export function batchClassOf(view: FleetView | null): string | null {
  return batchClassAmong(Object.keys(view?.waiting ?? {}));
}
