/** The fleet as JSON: the body of `GET /fleet/status`, and the backends in `/fleet/events` and the admin API's answers. */
import { BACKEND_STATES, type BackendState } from '../fleet/backend-lifecycle.js';
import { type KvBackendStatus, kvStatusOf } from '../fleet/kv-events/kv-events.js';
import type { Backend, FleetRegistry } from '../fleet/registry.js';
import type { BackendServing, FleetServing, ServingView } from '../metrics/serving-stats.js';

export interface BackendStatus {
  name: string;
  url: string;
  kind: string;
  /** The model names it served at its latest passed probe (first: the name it answers to); [] until read. */
  models: readonly string[];
  state: BackendState;
  phase: string | null;
  progress: { done: number; total: number } | null;
  eta_seconds: number | null;
  reason: string | null;
  inflight: number;
  /** Requests fleetgate keeps on it at most before queueing (`max_inflight_per_backend`); null = no cap. */
  inflight_cap: number | null;
  /** The prefix cache hit rate 0..1 the backend last reported (`sglang:cache_hit_rate`); null when unknown. */
  cache_hit_rate: number | null;
  since: string;
  ready_seconds: number | null;
  last_log_line: string | null;
  /** The serving view: last-minute rates and reported load (absent from `backend` events). */
  serving?: BackendServing;
  /** The engine process, for backends `fleetgate launch` started; null otherwise (absent from older servers). */
  supervision?: SupervisionStatus | null;
  /** Its KV-cache event stream (`kv-aware`): live, stale (a gap not replayed) or off, and the blocks held. */
  kv_events?: { state: KvBackendStatus['state']; blocks: number };
}

interface SupervisionStatus {
  pid: number | null;
  restarts: number;
  last_exit: { code: number | null; signal: string | null } | null;
  next_restart_at: string | null;
  remedy: string | null;
}

function supervisionStatus(backend: Backend): SupervisionStatus | null {
  const s = backend.supervision;
  if (s === null) return null;
  return {
    pid: s.pid,
    restarts: s.restarts,
    last_exit: s.lastExit,
    next_restart_at: s.nextRestartAt === null ? null : new Date(s.nextRestartAt).toISOString(),
    remedy: s.remedy,
  };
}

export interface FleetStatus {
  ready: number;
  total: number;
  min_ready: number;
  states: Partial<Record<BackendState, number>>;
  /** Requests waiting in fleetgate's queue, per priority class, highest first. */
  waiting?: Record<string, number>;
  backends: BackendStatus[];
  /** The fleet's last-minute totals. */
  serving?: FleetServing;
}

export function backendStatus(backend: Backend): BackendStatus {
  const s = backend.lifecycle.snapshot;
  return {
    name: backend.name,
    url: backend.url,
    kind: backend.config.kind,
    models: backend.models,
    state: s.state,
    phase: s.phase,
    progress: s.progress,
    eta_seconds: s.etaSeconds,
    reason: s.reason,
    inflight: backend.inflight,
    inflight_cap: backend.cap === 0 ? null : backend.cap,
    cache_hit_rate: cacheHitRate(backend),
    since: new Date(s.since).toISOString(),
    ready_seconds: s.readySeconds === null ? null : Math.round(s.readySeconds * 1000) / 1000,
    last_log_line: s.lastLogLine,
    supervision: supervisionStatus(backend),
    kv_events: kvEvents(backend),
  };
}

/** A backend's KV-event stream as `/fleet/status`, the page and `fleetgate status` show it. */
export function kvEvents(backend: Backend): { state: KvBackendStatus['state']; blocks: number } {
  const { state, blocks } = kvStatusOf(backend);
  return { state, blocks };
}

export function cacheHitRate(backend: Backend): number | null {
  const rate = backend.reported?.cacheHitRate;
  return rate == null ? null : Math.round(rate * 1000) / 1000;
}

export function countStates(backends: readonly Backend[]): Partial<Record<BackendState, number>> {
  const states: Partial<Record<BackendState, number>> = {};
  for (const state of BACKEND_STATES) {
    const n = backends.filter((b) => b.state === state).length;
    if (n > 0) states[state] = n;
  }
  return states;
}

/** `waiting`: requests waiting per priority class; `serving`: the serving view, where one is kept. */
export function fleetStatus(
  registry: FleetRegistry,
  minReady: number,
  waiting: Record<string, number> = {},
  serving?: ServingView,
): FleetStatus {
  const backends = registry.list();
  const status: FleetStatus = {
    ready: registry.ready.length,
    total: backends.length,
    min_ready: minReady,
    states: countStates(backends),
    waiting,
    backends: backends.map(backendStatus),
  };
  if (serving) {
    status.serving = serving.fleet;
    for (const b of status.backends) b.serving = serving.backends[b.name];
  }
  return status;
}
