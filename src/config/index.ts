/** Configuration: `loadConfig` for `fleetgate serve`, `validateConfig` for a raw object, and the `Config` type. */

export * from './defaults.js';
export { formatDuration, formatSize, parseDuration, parseSize } from './duration.js';
export { ConfigError } from './errors.js';
export {
  configExitCode,
  DEFAULT_CONFIG_PATH,
  formatConfigError,
  type LoadedConfig,
  type LoadOptions,
  loadConfig,
  parseServeArgs,
  type ServeArgs,
  type Setting,
  settingsFromEnv,
} from './load.js';
export * from './types.js';
export { coerceSettingText, LOG_LEVELS, parseHostPort, validateBackend, validateConfig } from './validate.js';
