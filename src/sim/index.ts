/** Simulated SGLang / vLLM servers for tests, benchmarks and the demo. */

export { SIM_SPEEDS, type SimSpeed } from './presets.js';
export { fleetOptions, SimFleet } from './sim-fleet.js';
export { SimServer } from './sim-server.js';
export { expectedThinkingAnswer } from './thinking-expected.js';
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
