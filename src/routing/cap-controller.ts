/**
 * `max_inflight_per_backend: auto`: sets each backend's cap from its load reports (the rule is in
 * adaptive-cap.ts). A backend not read yet, since it was added or last left `ready`, holds
 * `UNREAD_CAP` until its first report.
 */
import type { Backend, FleetRegistry, ReportedLoad } from '../fleet/registry.js';
import { nextAdaptiveCap, UNREAD_CAP } from './adaptive-cap.js';

export interface CapControllerOptions {
  registry: FleetRegistry;
  /** The load scraper runs (`routing.load_interval` > 0): without it nothing would read an unread backend. */
  scraping: boolean;
  /** Slots of each cap only the highest priority class may fill (`queue.reserve`; see nextAdaptiveCap). */
  heldBack?: number;
}

export class CapController {
  readonly #registry: FleetRegistry;
  readonly #unread = new WeakSet<Backend>();
  readonly #heldBack: number;

  constructor(opts: CapControllerOptions) {
    const registry = opts.registry;
    this.#registry = registry;
    this.#heldBack = opts.heldBack ?? 0;
    const slowStart = opts.scraping;
    const unread = (backend: Backend) => {
      this.#unread.add(backend);
      registry.setCap(backend, UNREAD_CAP);
    };
    if (slowStart) for (const backend of registry.list()) unread(backend);
    registry.on('added', (backend) => {
      if (slowStart) unread(backend);
    });
    registry.on('transition', ({ backend, to }) => {
      if (to === 'ready') return;
      // A restarted backend is a new process: its capacity is learned afresh.
      if (slowStart) unread(backend);
      else registry.setCap(backend, 0);
    });
    registry.on('load', (backend, report, previous) => this.#onReport(backend, report, previous));
  }

  #onReport(backend: Backend, report: ReportedLoad | null, previous: ReportedLoad | null): void {
    const firstRead = this.#unread.delete(backend);
    if (report === null) {
      // Nothing to learn a cap from (yet): routed by in-flight counts, uncapped, like any backend without metrics.
      if (firstRead) this.#registry.setCap(backend, 0);
      return;
    }
    const queuedBefore = previous?.queued ?? null;
    const cap = nextAdaptiveCap(
      { ...report, queuedBefore },
      firstRead ? 0 : backend.cap,
      report.inflightAtScrape,
      this.#heldBack,
    );
    this.#registry.setCap(backend, cap);
  }
}
