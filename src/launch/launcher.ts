/**
 * `fleetgate launch`: one supervisor per engine of the `launch` section, fed by the registry's changes,
 * and what happens to the engines when fleetgate stops (`launch.on_exit`).
 */
import type { Logger } from 'pino';
import type { LaunchConfig } from '../config/types.js';
import type { FleetRegistry } from '../fleet/registry.js';
import { EngineSupervisor } from './engine-supervisor.js';

export interface LauncherOptions {
  config: LaunchConfig;
  registry: FleetRegistry;
  logger: Logger;
  now?: () => number;
}

export class Launcher {
  readonly #opts: LauncherOptions;
  readonly #supervisors = new Map<string, EngineSupervisor>();

  constructor(opts: LauncherOptions) {
    this.#opts = opts;
    for (const engine of opts.config.engines) {
      const supervisor = new EngineSupervisor({ ...opts, engine, launch: opts.config });
      this.#supervisors.set(engine.name, supervisor);
    }
  }

  /** Starts every engine; a fleetgate that restarts adopts nothing it finds running. */
  start(): void {
    this.#opts.registry.on('change', (backend) => this.#supervisors.get(backend.name)?.observe(backend));
    for (const supervisor of this.#supervisors.values()) supervisor.start();
  }

  get(name: string): EngineSupervisor | undefined {
    return this.#supervisors.get(name);
  }

  /** Stops every engine (`on_exit: stop`) or leaves them running (`keep`). */
  async stop(): Promise<void> {
    const supervisors = [...this.#supervisors.values()];
    if (this.#opts.config.on_exit === 'keep') {
      const pids = supervisors.map((supervisor) => `${supervisor.engine.name}=${supervisor.detach() ?? '-'}`);
      this.#opts.logger.info(`launch.on_exit is keep: engines left running (${pids.join(', ')})`);
      return;
    }
    this.#opts.logger.info(`stopping ${supervisors.length} engines (SIGTERM, SIGKILL after launch.stop_grace)`);
    await Promise.all(supervisors.map((supervisor) => supervisor.stop()));
  }
}
