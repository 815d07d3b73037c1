/**
 * `max_inflight_per_backend: auto`: sets each backend's cap from its load reports (the rule is in
 * adaptive-cap.ts). A backend not read yet, since it was added or last left `ready`, holds
 * `UNREAD_CAP` until its first report.
 */
import type { Backend, FleetRegistry, ReportedLoad } from '../../fleet/registry.js';
import { KV_FULL, nextAdaptiveCap, UNREAD_CAP } from './adaptive-cap.js';
import { QUEUE_ALLOWANCE } from './backend-load.js';

export interface CapControllerOptions {
  registry: FleetRegistry;
  /** The load scraper runs (`routing.load_interval` > 0): without it nothing would read an unread backend. */
  scraping: boolean;
  /** `routing.cap_slow_start`: a backend read for the first time starts low and doubles until it queues. */
  slowStart?: boolean;
  /**
   * Every replica's requests count (`routing.cap_scope: fleet`): the cap is held against the load the
   * backend reports (wait-queue.ts `fleetWideCap`), so it closes to what the backend runs, not to
   * this replica's share of it. Off: each replica learns a cap for its own requests alone, and N
   * replicas together hold up to N caps.
   */
  fleetWide?: boolean;
}

export class CapController {
  readonly #registry: FleetRegistry;
  readonly #unread = new WeakSet<Backend>();
  /** Backends in slow start: read since they turned ready, and not yet seen queueing or KV-full. */
  readonly #starting = new WeakSet<Backend>();
  readonly #slowStart: boolean;
  readonly #fleetWide: boolean;
  /** With reports coming, a backend holds UNREAD_CAP until its first one. */
  readonly #startUnread: boolean;

  constructor(opts: CapControllerOptions) {
    const registry = opts.registry;
    this.#registry = registry;
    this.#slowStart = opts.slowStart ?? false;
    this.#fleetWide = opts.fleetWide ?? false;
    this.#startUnread = opts.scraping;
    if (this.#startUnread) for (const backend of registry.list()) this.#markUnread(backend);
    registry.on('added', this.#onAdded);
    registry.on('transition', this.#onTransition);
    registry.on('load', this.#onReport);
  }

  /** Stops following the registry: caps stay as they are. */
  stop(): void {
    this.#registry.off('added', this.#onAdded);
    this.#registry.off('transition', this.#onTransition);
    this.#registry.off('load', this.#onReport);
  }

  #markUnread(backend: Backend): void {
    this.#unread.add(backend);
    this.#registry.setCap(backend, UNREAD_CAP);
  }

  readonly #onAdded = (backend: Backend): void => {
    if (this.#startUnread) this.#markUnread(backend);
  };

  readonly #onTransition = ({ backend, to }: { backend: Backend; to: string }): void => {
    if (to === 'ready') return;
    // A restarted backend is a new process: its capacity is learned afresh.
    if (this.#startUnread) this.#markUnread(backend);
    else this.#registry.setCap(backend, 0);
  };

  readonly #onReport = (backend: Backend, report: ReportedLoad | null, previous: ReportedLoad | null): void => {
    const firstRead = this.#unread.delete(backend);
    if (report === null) {
      // Nothing to learn a cap from (yet): routed by in-flight counts, uncapped, like any backend without metrics.
      if (firstRead) this.#registry.setCap(backend, 0);
      return;
    }
    const queuedBefore = previous?.queued ?? null;
    if (firstRead && this.#slowStart) this.#starting.add(backend);
    if (report.queued >= QUEUE_ALLOWANCE || (report.tokenUsage ?? 0) >= KV_FULL) this.#starting.delete(backend);
    // Fleet-wide, the cap counts what the backend holds from every replica (at least this one's own).
    const held = this.#fleetWide
      ? Math.max(report.running + report.queued, report.inflightAtScrape)
      : report.inflightAtScrape;
    const cap = nextAdaptiveCap(
      { ...report, queuedBefore },
      firstRead ? 0 : backend.cap,
      held,
      this.#starting.has(backend),
    );
    this.#registry.setCap(backend, cap);
  };
}
