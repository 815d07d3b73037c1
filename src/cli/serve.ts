/**
 * `fleetgate serve`: load config, run the gateway until SIGTERM/SIGINT, reload on SIGHUP. `fleetgate launch`
 * is the same with the engines of `launch:` started and supervised first.
 */

import { createGateway, type Gateway } from '../app.js';
import { ConfigError, DEFAULT_CONFIG_PATH, formatConfigError, loadConfig, parseServeArgs } from '../config/index.js';
import type { Config } from '../config/types.js';
import { createLogger } from '../logging.js';

const usage = (
  verb: string,
) => `usage: fleetgate ${verb} [--config FILE] [--listen HOST:PORT] [--backend URL ...] [--set key.path=value ...]

Runs the proxy until SIGTERM or SIGINT (in-flight requests finish first); SIGHUP reloads the config.
\`launch\` first starts and supervises the engines of the config's launch: section.
The config is read from FILE, else $FLEETGATE_CONFIG, else ${DEFAULT_CONFIG_PATH} if it exists, else the
built-in default (SGLang servers on 127.0.0.1:30000-30006); FLEETGATE_* variables, then flags, override it.

options:
  --config FILE          YAML config file
  --listen HOST:PORT     where the proxy listens (config key listen)
  --backend URL          a backend, or a comma-separated list; replaces the file's backends and fleet
  --set key.path=value   any config key, e.g. --set health.interval=2s
  --log-level LEVEL      config key log.level
  -h, --help             this text

exit status: 0 stopped by a signal, 2 bad flag or config (nothing started)
`;

export function run(argv: string[]): Promise<number> {
  return runGateway(argv, { launch: false });
}

export async function runGateway(argv: string[], { launch }: { launch: boolean }): Promise<number> {
  let config: Config;
  const load = () => loadConfig({ argv, env: process.env, cwd: process.cwd() }).config;
  try {
    if (parseServeArgs(argv).help) {
      process.stdout.write(usage(launch ? 'launch' : 'serve'));
      return 0;
    }
    config = load();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${formatConfigError(error)}\n`);
      return 2;
    }
    throw error;
  }
  if (launch && config.launch === null) {
    process.stderr.write('fleetgate launch: the config has no launch: section (see config/examples/launch.yaml)\n');
    return 2;
  }
  const logger = createLogger(config.log);
  const gateway = await createGateway(config, { logger, reloadConfig: load, launch });
  const url = await gateway.listen();
  logger.info({ url, backends: config.backends.length }, `fleetgate listening on ${url}`);
  return runUntilSignal(gateway);
}

/** Resolves with exit code 0 after a graceful stop (a drain within `shutdown.grace`) on SIGTERM or SIGINT. */
export function runUntilSignal(gateway: Gateway, beforeClose: () => Promise<void> = async () => {}): Promise<number> {
  return new Promise((resolve) => {
    let stopping = false;
    const stop = async (signal: NodeJS.Signals) => {
      if (stopping) return;
      stopping = true;
      gateway.app.log.info(
        { signal, graceMs: gateway.config.shutdown.grace },
        'draining: /readyz now 503; letting in-flight requests finish, then stopping',
      );
      await gateway.drain();
      await beforeClose();
      process.off('SIGHUP', reload);
      resolve(0);
    };
    const reload = () => {
      const outcome = gateway.reload?.();
      if (outcome === undefined)
        gateway.app.log.warn('SIGHUP: reload is not available: fleetgate was not started from a config');
      else if (outcome.ok) gateway.app.log.info({ reload: outcome.result }, 'SIGHUP: reload');
      else gateway.app.log.warn(`SIGHUP: reload refused: ${outcome.message}`);
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
    process.on('SIGHUP', reload);
  });
}
