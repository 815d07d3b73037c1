/**
 * Reload (`POST /fleet/reload`, SIGHUP): the new config's backends are applied as a diff by name
 * (see `BackendSync`), so unchanged backends keep their state, counters and in-flight requests.
 * The file is the source of truth: a backend added through the admin API and not written in the
 * file is removed by a reload, as HAProxy's runtime changes are; write lasting changes to the file.
 *
 * Settings read per use are applied at once; the others (listen address, timeouts, health
 * cadence, routing policy, ...) were wired into sockets, pools and timers at start-up and are
 * reported as needing a restart, while the running values stay in `gateway.config`.
 */
import type { Config } from '../config/types.js';
import type { BackendDiff } from '../fleet/backend-sync.js';
import type { Gateway } from '../proxy/gateway.js';

export interface ReloadResult extends BackendDiff {
  /** Settings (other than backends) that changed and now apply. */
  applied: string[];
  /** Settings that changed but keep their running value until fleetgate restarts. */
  restart_required: string[];
}

/** Applied live: read per request (`min_ready`, keys, token), or by the fleet on change (`discovery`). */
const LIVE = new Set(['backends', 'discovery', 'min_ready', 'kind', 'auth', 'admin']);
/** Live one level down: the rate limit's figures are read per request, its plugin is registered at start. */
const LIVE_KEYS = new Set(['rate_limit.max', 'rate_limit.window', 'rate_limit.by']);

/** Values reported whole, though they are objects. */
const ADDRESSES = new Set(['listen', 'metrics_listen']);

/** Dotted keys whose values differ, one level into sections (`upstream.headers_timeout`). */
export function changedSettings(old: Config, next: Config): string[] {
  const changed: string[] = [];
  for (const key of Object.keys(next) as (keyof Config)[]) {
    if (key === 'backends') continue;
    const a: unknown = old[key];
    const b: unknown = next[key];
    if (isSection(a) && isSection(b) && !ADDRESSES.has(key)) {
      for (const sub of new Set([...Object.keys(a), ...Object.keys(b)])) {
        if (!same(a[sub], b[sub])) changed.push(`${key}.${sub}`);
      }
    } else if (!same(a, b)) {
      changed.push(key);
    }
  }
  return changed;
}

/** Applies `next` to the running gateway; throws `BackendConflictError` (nothing changed) on a name clash. */
export function reloadGateway(gateway: Gateway, next: Config): ReloadResult {
  const running = gateway.config;
  const changed = changedSettings(running, next);
  const diff = gateway.fleet.configured.apply(next.backends);
  gateway.fleet.setDiscovery(next.discovery);
  // Only the live keys change; the others keep their running values until a restart. Their readers
  // go through `gateway.config` per request, so the change applies at once.
  running.backends = next.backends;
  running.discovery = next.discovery;
  running.min_ready = next.min_ready;
  running.kind = next.kind;
  running.auth = next.auth;
  running.admin = next.admin;
  running.rate_limit = { ...next.rate_limit, enabled: running.rate_limit.enabled };
  const live = (key: string) => LIVE.has(key.split('.')[0]) || LIVE_KEYS.has(key);
  return {
    ...diff,
    applied: changed.filter(live),
    restart_required: changed.filter((key) => !live(key)),
  };
}

function isSection(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
