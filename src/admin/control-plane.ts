/** What the admin API may touch: the fleet, the running config and reload, not the whole application. */
import type { Config } from '../config/types.js';
import type { Fleet } from '../fleet/fleet.js';
import type { ReloadOutcome } from './reload.js';

export interface ControlPlane {
  readonly fleet: Fleet;
  /** The running config; a reload changes its live keys in place. */
  readonly config: Config;
  /** The engine `fleetgate launch` started for a backend; undefined for one it did not start. */
  supervisorOf(name: string): { restart(): void } | undefined;
  /** Re-reads the config and applies it; null when fleetgate was not started from a config file. */
  readonly reload: (() => ReloadOutcome) | null;
}
