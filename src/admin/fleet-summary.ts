/** The fleet as JSON: `GET /fleet/status`, and the body of `/readyz` and `/health`. */
import { BACKEND_STATES, type BackendState } from '../fleet/backend-state.js';
import type { Backend, FleetRegistry } from '../fleet/registry.js';

export interface BackendStatus {
  name: string;
  url: string;
  kind: string;
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
}

export interface FleetStatus {
  ready: number;
  total: number;
  min_ready: number;
  states: Partial<Record<BackendState, number>>;
  backends: BackendStatus[];
}

export function backendStatus(backend: Backend): BackendStatus {
  const s = backend.lifecycle.snapshot;
  return {
    name: backend.name,
    url: backend.url,
    kind: backend.config.kind,
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
  };
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

export function fleetStatus(registry: FleetRegistry, minReady: number): FleetStatus {
  const backends = registry.list();
  return {
    ready: registry.ready.length,
    total: backends.length,
    min_ready: minReady,
    states: countStates(backends),
    backends: backends.map(backendStatus),
  };
}
