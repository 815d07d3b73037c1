/**
 * Keeps the registry's backends from one source equal to what that source wants, by name. There are
 * two sources: the config file together with the admin API (`POST`/`DELETE /fleet/backends`,
 * reload), and DNS discovery. Each owns its members; neither touches the other's.
 *
 * A backend that leaves is drained and removed once its in-flight requests finished
 * (`FleetRegistry.remove`). A backend that changed (url, kind or log) is removed and added afresh
 * under the same name: a new URL is another server, a new log or kind another readiness gate. The
 * new one waits until the old one is gone, since the registry holds one backend per name and the
 * upstream pools one pool per origin; a long generation on the old one delays it that long.
 */
import type { BackendConfig } from '../config/types.js';
import type { Backend, FleetRegistry } from './registry.js';

export interface BackendDiff {
  added: string[];
  removed: string[];
  changed: string[];
  unchanged: string[];
}

/** Thrown when a backend's name or URL is already used by another one. */
export class BackendConflictError extends Error {
  override name = 'BackendConflictError';
}

function sameBackend(a: BackendConfig, b: BackendConfig): boolean {
  return a.url === b.url && a.kind === b.kind && a.log === b.log;
}

function diffBackends(current: readonly BackendConfig[], next: readonly BackendConfig[]): BackendDiff {
  const before = new Map(current.map((backend) => [backend.name, backend]));
  const diff: BackendDiff = { added: [], removed: [], changed: [], unchanged: [] };
  for (const backend of next) {
    const old = before.get(backend.name);
    if (old === undefined) diff.added.push(backend.name);
    else if (sameBackend(old, backend)) diff.unchanged.push(backend.name);
    else diff.changed.push(backend.name);
    before.delete(backend.name);
  }
  diff.removed.push(...before.keys());
  return diff;
}

export class BackendSync {
  readonly #registry: FleetRegistry;
  /** What this source wants, whether or not it is in the registry yet. */
  readonly #members = new Map<string, BackendConfig>();
  /** Members waiting for an old backend with their name or URL to finish its in-flight requests. */
  readonly #waiting = new Map<string, BackendConfig>();

  constructor(registry: FleetRegistry) {
    this.#registry = registry;
    registry.on('removed', this.#onRemoved);
  }

  get members(): BackendConfig[] {
    return [...this.#members.values()];
  }

  owns(name: string): boolean {
    return this.#members.has(name);
  }

  /** Why `config` cannot join now (its name or URL is taken), or null. */
  conflict(config: BackendConfig): string | null {
    const member = this.#members.get(config.name);
    if (member !== undefined) return `backend "${config.name}" already exists`;
    const current = this.#registry.get(config.name);
    if (current !== undefined) {
      return current.removing ? `backend "${config.name}" is being removed` : `backend "${config.name}" already exists`;
    }
    for (const other of [...this.#registry.list(), ...this.#members.values(), ...this.#waiting.values()]) {
      if (other.url === config.url) return `${config.url} is already backend "${other.name}"`;
    }
    return null;
  }

  /** Adds one backend now; throws `BackendConflictError` if its name or URL is taken. */
  add(config: BackendConfig): Backend {
    const problem = this.conflict(config);
    if (problem !== null) throw new BackendConflictError(problem);
    this.#members.set(config.name, config);
    return this.#registry.add(config);
  }

  /** Drains the member and removes it once idle; undefined if this source does not own it. */
  remove(name: string): Backend | undefined {
    if (!this.#members.delete(name)) return undefined;
    this.#waiting.delete(name);
    return this.#registry.remove(name);
  }

  /**
   * Makes the members equal `next`. Throws `BackendConflictError`, changing nothing, when a new
   * member's name or URL belongs to a backend of another source.
   */
  apply(next: readonly BackendConfig[]): BackendDiff {
    const diff = diffBackends(this.members, next);
    const incoming = next.filter((backend) => !this.#members.has(backend.name));
    for (const backend of incoming) {
      const taken = this.#registry.list().find((b) => b.name === backend.name || b.url === backend.url);
      if (taken !== undefined && !this.#members.has(taken.name) && !taken.removing) {
        throw new BackendConflictError(
          `backend "${backend.name}" (${backend.url}) conflicts with "${taken.name}" (${taken.url})`,
        );
      }
    }
    const wanted = new Map(next.map((backend) => [backend.name, backend]));
    for (const name of [...diff.removed, ...diff.changed]) {
      this.#members.delete(name);
      this.#waiting.delete(name);
      this.#registry.remove(name);
    }
    for (const name of [...diff.added, ...diff.changed]) {
      const backend = wanted.get(name)!;
      this.#members.set(name, backend);
      this.#waiting.set(name, backend);
    }
    this.#admitWaiting();
    return diff;
  }

  close(): void {
    this.#registry.off('removed', this.#onRemoved);
  }

  #admitWaiting(): void {
    for (const [name, backend] of this.#waiting) {
      const blocked = this.#registry.list().some((b) => b.name === name || b.url === backend.url);
      if (blocked) continue;
      this.#waiting.delete(name);
      this.#registry.add(backend);
    }
  }

  /**
   * Deferred: the other `removed` listeners (the upstream pool of that origin, metrics) must finish
   * before a backend with the same name or URL is added.
   */
  readonly #onRemoved = (): void => {
    if (this.#waiting.size > 0) queueMicrotask(() => this.#admitWaiting());
  };
}
