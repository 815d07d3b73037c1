/**
 * `fleetgate launch`: one supervisor per engine of the `launch` section, fed by the registry's changes,
 * what a reload does to the set of engines, and what happens to the engines when fleetgate stops
 * (`launch.on_exit`).
 */
import type { Logger } from 'pino';
import type { LaunchConfig, LaunchEngine } from '../config/types.js';
import type { FleetRegistry } from '../fleet/registry.js';
import { EngineSupervisor } from './engine-supervisor.js';

export interface LauncherOptions {
  config: LaunchConfig;
  registry: FleetRegistry;
  logger: Logger;
  now?: () => number;
}

/** What a reload did to the engines, by name. */
export interface EngineChanges {
  started: string[];
  stopped: string[];
  /** Changed (command line, port, log, ...): stopped, then started again from the new spec. */
  restarted: string[];
}

export class Launcher {
  readonly #opts: LauncherOptions;
  readonly #supervisors = new Map<string, EngineSupervisor>();
  #started = false;
  /** Engines a reload is stopping; fleetgate's own stop waits for them too. */
  readonly #retiring = new Set<Promise<void>>();

  constructor(opts: LauncherOptions) {
    this.#opts = opts;
    for (const engine of opts.config.engines) this.#supervisors.set(engine.name, this.#supervise(engine));
  }

  /** Starts every engine; a fleetgate that restarts adopts nothing it finds running. */
  start(): void {
    this.#started = true;
    this.#opts.registry.on('change', (backend) => this.#supervisors.get(backend.name)?.observe(backend));
    for (const supervisor of this.#supervisors.values()) supervisor.start();
  }

  /**
   * A reload's engines, as a diff by name like the backends': an engine no longer listed is stopped
   * (its backend left the fleet with the same reload, so nothing else would ever stop it), a new one
   * is started, and a changed one is stopped and then started from its new spec. Unchanged engines
   * keep running untouched. The policy keys (backoff, grace, remedies) keep their running values.
   */
  apply(engines: readonly LaunchEngine[]): EngineChanges {
    const changes: EngineChanges = { started: [], stopped: [], restarted: [] };
    const next = new Map(engines.map((engine) => [engine.name, engine]));
    for (const [name, supervisor] of this.#supervisors) {
      if (next.has(name)) continue;
      this.#supervisors.delete(name);
      changes.stopped.push(name);
      this.#retire(supervisor);
    }
    for (const engine of engines) {
      const running = this.#supervisors.get(engine.name);
      if (running !== undefined && JSON.stringify(running.engine) === JSON.stringify(engine)) continue;
      const supervisor = this.#supervise(engine);
      this.#supervisors.set(engine.name, supervisor);
      if (running === undefined) {
        changes.started.push(engine.name);
        if (this.#started) supervisor.start();
      } else {
        changes.restarted.push(engine.name);
        // The new spec may reuse the port: the old process is gone before the new one binds.
        void this.#retire(running).then(() => {
          if (this.#started && this.#supervisors.get(engine.name) === supervisor) supervisor.start();
        });
      }
    }
    const { started, stopped, restarted } = changes;
    if (started.length + stopped.length + restarted.length > 0) {
      this.#opts.logger.info({ engines: changes }, 'reload: engines changed');
    }
    return changes;
  }

  #retire(supervisor: EngineSupervisor): Promise<void> {
    const stopping = supervisor.stop().finally(() => this.#retiring.delete(stopping));
    this.#retiring.add(stopping);
    return stopping;
  }

  #supervise(engine: LaunchEngine): EngineSupervisor {
    return new EngineSupervisor({ ...this.#opts, engine, launch: this.#opts.config });
  }

  get(name: string): EngineSupervisor | undefined {
    return this.#supervisors.get(name);
  }

  /** Stops every engine (`on_exit: stop`) or leaves them running (`keep`). */
  async stop(): Promise<void> {
    this.#started = false;
    const supervisors = [...this.#supervisors.values()];
    if (this.#opts.config.on_exit === 'keep') {
      const pids = supervisors.map((supervisor) => `${supervisor.engine.name}=${supervisor.detach() ?? '-'}`);
      this.#opts.logger.info(`launch.on_exit is keep: engines left running (${pids.join(', ')})`);
      return;
    }
    this.#opts.logger.info(`stopping ${supervisors.length} engines (SIGTERM, SIGKILL after launch.stop_grace)`);
    await Promise.all([...supervisors.map((supervisor) => supervisor.stop()), ...this.#retiring]);
  }
}
