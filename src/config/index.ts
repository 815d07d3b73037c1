/** Configuration as `fleetgate serve` loads it: `loadConfig`, its errors and their exit code. */

export { ConfigError } from './errors.js';
export { configExitCode, DEFAULT_CONFIG_PATH, formatConfigError, loadConfig, parseServeArgs } from './load.js';
