/**
 * `node --import tsx test/helpers/config-cli.ts [serve flags]`: loads the config as `fleetgate serve` does and
 * prints it as JSON (exit 0), or prints the config error to stderr (exit 2).
 */
import { ConfigError, configExitCode, formatConfigError, loadConfig } from '../../src/config/index.js';

try {
  const { config, path, rest } = loadConfig({ argv: process.argv.slice(2) });
  process.stdout.write(`${JSON.stringify({ path, rest, config })}\n`);
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  process.stderr.write(`${formatConfigError(error)}\n`);
  process.exitCode = configExitCode;
}
