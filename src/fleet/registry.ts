/**
 * The fleet registry: the one source of truth about backends. Router, metrics, status API and
 * page read it or subscribe to its events; the prober, log followers, proxy and admin API feed it
 * events. It does no I/O.
 */
import { EventEmitter } from 'node:events';
import type { BackendConfig } from '../config/types.js';
import {
  type BackendEvent,
  BackendLifecycle,
  type BackendSnapshot,
  type BackendState,
  type ProbeResult,
  type Transition,
} from './backend-lifecycle.js';
import { sameNames, servesModel } from './model-names.js';

/** Load as the backend itself reports it (SGLang/vLLM `/metrics`). */
export interface ReportedLoad {
  running: number;
  queued: number;
  /** KV-cache usage 0..1, when reported. */
  tokenUsage: number | null;
  /** The backend's own concurrency limit, when reported. */
  maxRunning: number | null;
  /** The backend's generation-token counter, when reported (the serving view's tokens/s). */
  generationTokens?: number | null;
  /** Its KV pool in tokens (`sglang:max_total_num_tokens`), when reported. */
  kvTokens?: number | null;
  /** Its prefix cache hit rate 0..1 (`sglang:cache_hit_rate`), when reported. */
  cacheHitRate?: number | null;
  /** fleetgate's in-flight count when the report was taken. */
  inflightAtScrape: number;
}

/** What `fleetgate launch` reports about the engine process behind a backend. */
export interface Supervision {
  /** Null between a stop and the next start. */
  pid: number | null;
  /** Restarts since fleetgate started (operator restarts included). */
  restarts: number;
  lastExit: { code: number | null; signal: string | null } | null;
  /** ms epoch of the scheduled restart, or null. */
  nextRestartAt: number | null;
  /** The latest remedy applied, e.g. `--mem-fraction-static 0.88 -> 0.83`. */
  remedy: string | null;
}

/** Why a supervised engine was restarted (`fleetgate_backend_restarts_total{reason}`). */
export type RestartReason = 'exit' | 'failed' | 'stalled' | 'no_progress' | 'operator';
export const RESTART_REASONS: readonly RestartReason[] = ['exit', 'failed', 'stalled', 'no_progress', 'operator'];

/** What the registry counts on a backend; only the registry writes it, everyone else reads `Backend`. */
interface BackendCounts {
  inflight: number;
  reported: ReportedLoad | null;
  cap: number;
  removing: boolean;
  supervision: Supervision | null;
}

export class Backend {
  readonly config: BackendConfig;
  readonly lifecycle: BackendLifecycle;
  readonly #counts: BackendCounts;
  #models: readonly string[] = [];

  constructor(config: BackendConfig, lifecycle: BackendLifecycle, counts: BackendCounts) {
    this.config = config;
    this.lifecycle = lifecycle;
    this.#counts = counts;
  }

  /** Requests fleetgate has in flight to this backend. */
  get inflight(): number {
    return this.#counts.inflight;
  }

  /** Its latest load report (routing/load/backend-load.ts reads it); null until read, and once it leaves `ready`. */
  get reported(): ReportedLoad | null {
    return this.#counts.reported;
  }

  /** Cap on in-flight requests; 0 = none. Set from config or, with `auto`, from reported capacity. */
  get cap(): number {
    return this.#counts.cap;
  }

  /** Set when removal was asked: no new requests; removed once in-flight reaches 0. */
  get removing(): boolean {
    return this.#counts.removing;
  }

  /** Set by `fleetgate launch` for the engines it started; null otherwise. */
  get supervision(): Supervision | null {
    return this.#counts.supervision;
  }

  get name(): string {
    return this.config.name;
  }

  get url(): string {
    return this.config.url;
  }

  get state(): BackendState {
    return this.lifecycle.state;
  }

  /** The model names it served at its latest passed probe (first: the name it answers to); [] until read. */
  get models(): readonly string[] {
    return this.#models;
  }

  /** Its model pool's key: the name it answers to, or null until read. */
  get model(): string | null {
    return this.#models[0] ?? null;
  }

  /** Registry only: a probe read the names it serves. True when they changed. */
  setModels(models: readonly string[]): boolean {
    if (sameNames(models, this.#models)) return false;
    this.#models = models;
    return true;
  }
}

export interface TransitionEvent extends Transition {
  backend: Backend;
}

export interface RegistryEvents {
  added: [Backend];
  removed: [Backend];
  transition: [TransitionEvent];
  /** Anything visible changed (state, phase, progress, reason, in-flight is not included). */
  change: [Backend];
  /** A readiness probe finished (for `fleetgate_health_checks_total`). */
  probe: [Backend, ProbeResult];
  /** A backend's cap rose or was lifted, or a request on it ended: requests waiting may fit now. */
  capacity: [Backend];
  /** A load report was read (`previous`: the one it replaces); null when the read found none. */
  load: [Backend, ReportedLoad | null, ReportedLoad | null];
  /** `fleetgate launch` is restarting the backend's engine. */
  restart: [Backend, RestartReason];
  /** A backend's served models were read for the first time or changed (a restart with another model). */
  models: [Backend];
}

export interface RegistryOptions {
  rise: number;
  fall: number;
  stallAfter: number;
  /** `health.ejection_time` / `health.max_ejection_time` (backend-lifecycle.ts); absent = 0, re-admit at `rise` probes. */
  ejectionTime?: number;
  maxEjectionTime?: number;
  /** `health.failure_quiet` (backend-lifecycle.ts); absent = 0, off. */
  failureQuiet?: number;
  defaultCap: number;
  now?: () => number;
}

export class FleetRegistry extends EventEmitter<RegistryEvents> {
  readonly #opts: RegistryOptions;
  readonly #now: () => number;
  readonly #backends = new Map<string, Backend>();
  readonly #counts = new WeakMap<Backend, BackendCounts>();
  /** Rebuilt on every transition, so routing reads a ready-made list per request. */
  #ready: Backend[] = [];
  /** The same per model pool (keyed by `Backend.model`). */
  #readyByModel = new Map<string, Backend[]>();

  constructor(opts: RegistryOptions) {
    super();
    // Every view of the fleet subscribes (metrics, status events, serving view, queues, launcher,
    // watchdog, access log, and each open /fleet/events stream per event): more than node's 10.
    this.setMaxListeners(100);
    this.#opts = opts;
    this.#now = opts.now ?? Date.now;
  }

  get ready(): readonly Backend[] {
    return this.#ready;
  }

  /** Ready backends serving `model` (a pool key, or a name matched as `expect_model` is). */
  readyServing(model: string): readonly Backend[] {
    let ready = this.#readyByModel.get(model);
    if (ready === undefined) {
      ready = this.#ready.filter((backend) => servesModel(backend.models, model));
      this.#readyByModel.set(model, ready);
    }
    return ready;
  }

  /** Every model pool a registered backend was last seen serving, with the names it answers to. */
  models(): Map<string, string[]> {
    const pools = new Map<string, string[]>();
    for (const backend of this.#backends.values()) {
      const key = backend.model;
      if (key === null) continue;
      const names = pools.get(key) ?? [];
      for (const name of backend.models) if (!names.includes(name)) names.push(name);
      pools.set(key, names);
    }
    return pools;
  }

  list(): Backend[] {
    return [...this.#backends.values()];
  }

  get(name: string): Backend | undefined {
    return this.#backends.get(name);
  }

  get size(): number {
    return this.#backends.size;
  }

  add(config: BackendConfig): Backend {
    if (this.#backends.has(config.name)) throw new Error(`backend "${config.name}" already exists`);
    const lifecycle = new BackendLifecycle({
      rise: this.#opts.rise,
      fall: this.#opts.fall,
      stallAfter: this.#opts.stallAfter,
      ejectionTime: this.#opts.ejectionTime,
      maxEjectionTime: this.#opts.maxEjectionTime,
      failureQuiet: this.#opts.failureQuiet,
      hasLog: config.log !== null,
      now: this.#now,
    });
    const counts: BackendCounts = {
      inflight: 0,
      reported: null,
      cap: this.#opts.defaultCap,
      removing: false,
      supervision: null,
    };
    const backend = new Backend(config, lifecycle, counts);
    this.#counts.set(backend, counts);
    this.#backends.set(config.name, backend);
    this.emit('added', backend);
    this.emit('change', backend);
    return backend;
  }

  /** Drains the backend, then removes it once its in-flight requests are done. */
  remove(name: string): Backend | undefined {
    const backend = this.#backends.get(name);
    if (!backend) return undefined;
    this.#countsOf(backend).removing = true;
    this.apply(backend, { type: 'drain' });
    this.#removeIfIdle(backend);
    return backend;
  }

  /** Sets a backend's in-flight cap (0 = none); a cap that opens emits `capacity`. */
  setCap(backend: Backend, cap: number): void {
    const opens = cap === 0 ? backend.cap !== 0 : backend.cap !== 0 && cap > backend.cap;
    this.#countsOf(backend).cap = cap;
    if (opens) this.emit('capacity', backend);
  }

  /** The launch supervisor's report on the engine process; status and metrics read it here. */
  setSupervision(backend: Backend, supervision: Supervision): void {
    this.#countsOf(backend).supervision = supervision;
    this.emit('change', backend);
  }

  restarting(backend: Backend, reason: RestartReason): void {
    this.emit('restart', backend, reason);
  }

  /**
   * The load scraper's report (`load` null: the read found none, the last report stays). Stamped with
   * the in-flight count when the read was sent (`inflightAtScrape`; default now), so routing can add
   * what was dispatched since (routing/load/backend-load.ts).
   */
  reportLoad(backend: Backend, load: Omit<ReportedLoad, 'inflightAtScrape'> | null, inflightAtScrape?: number): void {
    const counts = this.#countsOf(backend);
    const previous = counts.reported;
    if (load !== null) counts.reported = { ...load, inflightAtScrape: inflightAtScrape ?? counts.inflight };
    this.emit('load', backend, load === null ? null : counts.reported, previous);
  }

  /** A request was sent to the backend (the wait queue's lease). */
  take(backend: Backend): void {
    this.#countsOf(backend).inflight++;
  }

  /** A request on the backend ended: a drained backend being removed may go now; a waiter may fit. */
  release(backend: Backend): void {
    this.#countsOf(backend).inflight--;
    if (backend.removing) this.#removeIfIdle(backend);
    this.emit('capacity', backend);
  }

  apply(backend: Backend, event: BackendEvent): Transition | null {
    if (this.#backends.get(backend.name) !== backend) return null;
    const before = backend.lifecycle.snapshot;
    const transition = backend.lifecycle.apply(event);
    const modelsChanged =
      event.type === 'probe' && event.result.models !== undefined && backend.setModels(event.result.models);
    if (event.type === 'probe') this.emit('probe', backend, event.result);
    // A backend that left `ready` restarts or stops: its last report no longer says what it runs.
    if (transition && transition.to !== 'ready') this.#countsOf(backend).reported = null;
    if (transition || modelsChanged) this.#rebuildReady();
    if (modelsChanged) this.emit('models', backend);
    if (transition) this.emit('transition', { ...transition, backend });
    if (transition || modelsChanged || visiblyChanged(before, backend.lifecycle.snapshot)) this.emit('change', backend);
    return transition;
  }

  /** Re-evaluates time-based facts (stall detection). */
  tick(): void {
    for (const backend of this.#backends.values()) this.apply(backend, { type: 'tick' });
  }

  #countsOf(backend: Backend): BackendCounts {
    return this.#counts.get(backend) as BackendCounts;
  }

  #removeIfIdle(backend: Backend): void {
    if (backend.inflight > 0 || this.#backends.get(backend.name) !== backend) return;
    this.#backends.delete(backend.name);
    this.#rebuildReady();
    this.emit('removed', backend);
  }

  #rebuildReady(): void {
    this.#ready = [...this.#backends.values()].filter((b) => b.state === 'ready' && !b.removing);
    const byModel = new Map<string, Backend[]>();
    for (const backend of this.#ready) {
      if (backend.model === null) continue;
      const pool = byModel.get(backend.model);
      if (pool) pool.push(backend);
      else byModel.set(backend.model, [backend]);
    }
    this.#readyByModel = byModel;
  }
}

function visiblyChanged(a: BackendSnapshot, b: BackendSnapshot): boolean {
  return (
    a.phase !== b.phase ||
    a.reason !== b.reason ||
    a.etaSeconds !== b.etaSeconds ||
    a.lastLogLine !== b.lastLogLine ||
    a.progress?.done !== b.progress?.done ||
    a.progress?.total !== b.progress?.total
  );
}
