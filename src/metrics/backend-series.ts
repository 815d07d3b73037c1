/**
 * All series of one backend: its state-side gauges and counters plus its request-side series.
 * Label children are bound when the backend is added; `remove()` drops every series it created, so
 * a backend that leaves the fleet leaves no stale series behind.
 */
import type { Counter, Gauge } from 'prom-client';
import {
  BACKEND_STATES,
  type BackendSnapshot,
  type BackendState,
  SUSPECT_CAUSES,
  type SuspectCause,
} from '../fleet/backend-lifecycle.js';
import { type Backend, RESTART_REASONS, type RestartReason } from '../fleet/registry.js';
import { RESUME_TRIGGERS } from '../proxy/stream-resume.js';
import { backendLoad } from '../routing/load/backend-load.js';
import type { MetricFamilies } from './definitions.js';
import { RequestSeries } from './request-series.js';

/** The child under `key`, bound by `bind` on first use and kept, so `remove()` knows every one. */
function boundOnce<K>(children: Map<K, Counter.Internal>, key: K, bind: () => Counter.Internal): Counter.Internal {
  let child = children.get(key);
  if (child === undefined) {
    child = bind();
    children.set(key, child);
  }
  return child;
}

export class BackendSeries {
  readonly backend: Backend;
  readonly requests: RequestSeries;
  readonly #families: MetricFamilies;
  readonly #up: Gauge.Internal<'backend'>;
  readonly #states = new Map<BackendState, Gauge.Internal<'backend' | 'state'>>();
  readonly #inflight: Gauge.Internal<'backend'>;
  readonly #inflightCap: Gauge.Internal<'backend'>;
  readonly #load: Gauge.Internal<'backend'>;
  /** `routing.replicas`, for the load figure (routing/load/backend-load.ts). */
  readonly #replicas: number;
  readonly #progress: Gauge.Internal<'backend'>;
  readonly #readySeconds: Gauge.Internal<'backend'>;
  readonly #probePass: Counter.Internal;
  readonly #probeFail: Counter.Internal;
  /** Keyed `from>to`: at most 30 pairs. */
  readonly #transitions = new Map<string, Counter.Internal>();
  readonly #supervised: Gauge.Internal<'backend'>;
  readonly #restarts = new Map<RestartReason, Counter.Internal>();
  /** By reason: any failure kind a resume follows, bound on first use; `remove()` drops each. */
  readonly #resumes = new Map<string, Counter.Internal>();
  #state: BackendState;

  constructor(families: MetricFamilies, backend: Backend, replicas = 1) {
    this.backend = backend;
    this.#replicas = replicas;
    this.#families = families;
    const name = backend.name;
    this.requests = new RequestSeries(families, name, { zeroed: true });
    this.#up = families.backendUp.labels({ backend: name });
    for (const state of BACKEND_STATES) this.#states.set(state, families.backendState.labels({ backend: name, state }));
    this.#inflight = families.inflight.labels({ backend: name });
    this.#inflightCap = families.inflightCap.labels({ backend: name });
    this.#load = families.backendLoad.labels({ backend: name });
    this.#progress = families.loadProgress.labels({ backend: name });
    this.#readySeconds = families.readySeconds.labels({ backend: name });
    this.#probePass = families.healthChecks.labels({ backend: name, result: 'pass' });
    this.#probeFail = families.healthChecks.labels({ backend: name, result: 'fail' });
    this.#probePass.inc(0);
    this.#probeFail.inc(0);
    this.#supervised = families.supervised.labels({ backend: name });
    // At 0 from the start, like the restarts below, so dashboards and `increase()` find them.
    for (const by of SUSPECT_CAUSES) families.startupFailures.labels({ backend: name, by }).inc(0);
    for (const reason of RESUME_TRIGGERS) this.#resumeCounter(reason).inc(0);
    // At 0 from the start, for `increase()` in the restart-loop alert (0 for backends not launched).
    for (const reason of RESTART_REASONS) {
      const counter = families.restarts.labels({ backend: name, reason });
      counter.inc(0);
      this.#restarts.set(reason, counter);
    }
    // Transitions into and out of `ready` start at 0: `increase()` cannot count a series' first
    // sample, and the flapping alert and dashboard read exactly these.
    for (const other of BACKEND_STATES) {
      if (other === 'ready') continue;
      this.#transitionCounter(other, 'ready').inc(0);
      this.#transitionCounter('ready', other).inc(0);
    }
    this.#state = backend.state;
    this.#showState(backend.state);
    this.collectInflight();
    this.snapshotChanged(backend.lifecycle.snapshot);
    this.supervisionChanged();
  }

  get state(): BackendState {
    return this.#state;
  }

  transition(from: BackendState, to: BackendState, cause?: SuspectCause): void {
    this.#transitionCounter(from, to).inc();
    if (cause !== undefined) {
      this.#families.startupFailures.labels({ backend: this.backend.name, by: cause }).inc();
    }
    this.#state = to;
    this.#showState(to);
  }

  /** Phase progress and time-to-ready, from the snapshot a `change` event announced. */
  snapshotChanged(snapshot: BackendSnapshot): void {
    const progress = snapshot.progress;
    this.#progress.set(progress !== null && progress.total > 0 ? Math.min(1, progress.done / progress.total) : 0);
    // Kept after a restart (the lifecycle then forgets it) until the new start reaches ready.
    if (snapshot.readySeconds !== null) this.#readySeconds.set(snapshot.readySeconds);
  }

  supervisionChanged(): void {
    this.#supervised.set(this.backend.supervision !== null ? 1 : 0);
  }

  restarted(reason: RestartReason): void {
    this.#restarts.get(reason)?.inc();
  }

  /** A stream cut on this backend by `reason` (a failure kind) went on elsewhere. */
  resumed(reason: string): void {
    this.#resumeCounter(reason).inc();
  }

  probe(ok: boolean): void {
    (ok ? this.#probePass : this.#probeFail).inc();
  }

  /** In-flight count, load and cap, read when scraped (they change on the request path). */
  collectInflight(): void {
    this.#inflight.set(this.backend.inflight);
    this.#inflightCap.set(this.backend.cap);
    this.#load.set(backendLoad(this.backend, this.#replicas));
  }

  remove(): void {
    const f = this.#families;
    const backend = this.backend.name;
    this.requests.remove();
    f.backendUp.remove({ backend });
    for (const state of BACKEND_STATES) f.backendState.remove({ backend, state });
    f.inflight.remove({ backend });
    f.inflightCap.remove({ backend });
    f.backendLoad.remove({ backend });
    f.loadProgress.remove({ backend });
    f.readySeconds.remove({ backend });
    f.healthChecks.remove({ backend, result: 'pass' });
    f.healthChecks.remove({ backend, result: 'fail' });
    f.supervised.remove({ backend });
    for (const reason of this.#restarts.keys()) f.restarts.remove({ backend, reason });
    for (const by of SUSPECT_CAUSES) f.startupFailures.remove({ backend, by });
    for (const reason of this.#resumes.keys()) f.streamResumes.remove({ backend, reason });
    for (const key of this.#transitions.keys()) {
      const [from, to] = key.split('>');
      f.transitions.remove({ backend, from, to });
    }
  }

  #transitionCounter(from: BackendState, to: BackendState): Counter.Internal {
    const backend = this.backend.name;
    return boundOnce(this.#transitions, `${from}>${to}`, () =>
      this.#families.transitions.labels({ backend, from, to }),
    );
  }

  #resumeCounter(reason: string): Counter.Internal {
    const backend = this.backend.name;
    return boundOnce(this.#resumes, reason, () => this.#families.streamResumes.labels({ backend, reason }));
  }

  #showState(current: BackendState): void {
    this.#up.set(current === 'ready' ? 1 : 0);
    for (const [state, gauge] of this.#states) gauge.set(state === current ? 1 : 0);
  }
}
