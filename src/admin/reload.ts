/**
 * Reload (`POST /fleet/reload`, SIGHUP): the new config's backends are applied as a diff by name
 * (see `BackendSync`), so unchanged backends keep their state, counters and in-flight requests.
 * The file is the source of truth: a backend added through the admin API and not written in the
 * file is removed by a reload, as HAProxy's runtime changes are; write lasting changes to the file.
 *
 * Under `fleetgate launch` the engines follow their backends: see `Launcher.apply`.
 *
 * Settings read per use are applied at once; the others (listen address, timeouts, health
 * cadence, routing policy, ...) were wired into sockets, pools and timers at start-up and are
 * reported as needing a restart, while the running values stay in the running config.
 */
import { ConfigError } from '../config/errors.js';
import { isObject } from '../config/json-object.js';
import type { Config } from '../config/types.js';
import { BackendConflictError, type BackendDiff } from '../fleet/backend-sync.js';
import type { Fleet } from '../fleet/fleet.js';
import type { EngineChanges, Launcher } from '../launch/launcher.js';

interface ReloadResult extends BackendDiff {
  /** Settings (other than backends) that changed and now apply. */
  applied: string[];
  /** Settings that changed but keep their running value until fleetgate restarts. */
  restart_required: string[];
  /** Under `fleetgate launch`: the engines started, stopped and restarted. */
  engines?: EngineChanges;
}

/** Applied live: read per request (`min_ready`, keys, token), or by the fleet on change (`discovery`). */
const LIVE = new Set(['backends', 'discovery', 'min_ready', 'kind', 'auth', 'admin']);
/** Live one level down: the rate limit's figures are read per request, its plugin is registered at start. */
const LIVE_KEYS = new Set(['rate_limit.max', 'rate_limit.window', 'rate_limit.by']);

/** Values reported whole, though they are objects. */
const ADDRESSES = new Set(['listen', 'metrics_listen']);

/** Dotted keys whose values differ, one level into sections (`upstream.headers_timeout`). */
function changedSettings(old: Config, next: Config): string[] {
  const changed: string[] = [];
  for (const key of Object.keys(next) as (keyof Config)[]) {
    if (key === 'backends') continue;
    const a: unknown = old[key];
    const b: unknown = next[key];
    if (isObject(a) && isObject(b) && !ADDRESSES.has(key)) {
      for (const sub of new Set([...Object.keys(a), ...Object.keys(b)])) {
        if (!same(a[sub], b[sub])) changed.push(`${key}.${sub}`);
      }
    } else if (!same(a, b)) {
      changed.push(key);
    }
  }
  return changed;
}

/** A reload done, or refused with the running config unchanged (what `POST /fleet/reload` answers). */
export type ReloadOutcome = { ok: true; result: ReloadResult } | { ok: false; status: 400 | 409; message: string };

/**
 * Reads the config with `read` and applies it; an invalid file or a name clash changes nothing.
 * `launcher` is there under `fleetgate launch`.
 */
export function reload(
  fleet: Fleet,
  running: Config,
  read: () => Config,
  launcher: Launcher | null = null,
): ReloadOutcome {
  try {
    return { ok: true, result: applyConfig(fleet, running, read(), launcher) };
  } catch (error) {
    if (error instanceof ConfigError) {
      const message = `config rejected, the running config stays: ${error.message}${error.source ? ` (${error.source})` : ''}`;
      return { ok: false, status: 400, message };
    }
    if (error instanceof BackendConflictError) {
      return { ok: false, status: 409, message: `config rejected, the running config stays: ${error.message}` };
    }
    throw error;
  }
}

/** Applies `next` to the running fleet and config; throws `BackendConflictError` (nothing changed) on a name clash. */
function applyConfig(fleet: Fleet, running: Config, next: Config, launcher: Launcher | null): ReloadResult {
  if (launcher !== null && next.launch === null) {
    throw new ConfigError('launch', 'is missing: fleetgate launch needs its engines (stop it to stop them all)');
  }
  const changed = changedSettings(running, next);
  const diff = fleet.configured.apply(next.backends);
  fleet.setDiscovery(next.discovery);
  // Only the live keys change; the others keep their running values until a restart. Their readers
  // read the running config per request, so the change applies at once.
  running.backends = next.backends;
  running.discovery = next.discovery;
  running.min_ready = next.min_ready;
  running.kind = next.kind;
  running.auth = next.auth;
  running.admin = next.admin;
  running.rate_limit = { ...next.rate_limit, enabled: running.rate_limit.enabled };
  let engines: EngineChanges | undefined;
  if (launcher !== null && running.launch !== null && next.launch !== null) {
    running.launch = { ...running.launch, engines: next.launch.engines };
    engines = launcher.apply(next.launch.engines);
  }
  const live = (key: string) =>
    LIVE.has(key.split('.')[0]) || LIVE_KEYS.has(key) || (launcher !== null && key === 'launch.engines');
  return {
    ...diff,
    applied: changed.filter(live),
    restart_required: changed.filter((key) => !live(key)),
    ...(engines && { engines }),
  };
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
