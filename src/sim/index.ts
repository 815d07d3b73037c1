/** Simulated SGLang / vLLM servers for tests, benchmarks and the demo. */
export { type FleetSpec, fleetOptions, SimFleet } from './sim-fleet.js';
export { SimServer } from './sim-server.js';
export { DEFAULT_MODEL, engineFor, SIM_SPEEDS, SPEED_PRESETS, type SimSpeed, timingFor } from './presets.js';
export {
  FAILURE_MODES,
  INFO_PATHS,
  type SimCounters,
  type SimEngineOptions,
  type SimFailure,
  type SimFailureMode,
  type SimOptions,
  type SimStatus,
  type SimTiming,
} from './types.js';
