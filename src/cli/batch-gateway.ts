/**
 * `fleetgate batch --serve|--launch`: the gateway built inside the batch process for one run, from the
 * same config and flags as `fleetgate serve`/`launch`, so a generation job needs one command and
 * leaves nothing running. It differs from `serve` only where a one-run gateway should: it listens on
 * an ephemeral loopback port, logs warnings only, on stderr, with no access log (the progress is the
 * output), the Batch API is off (the jobs under `batch.dir` belong to a long-running fleetgate), and
 * so is the start-up warm-up (it is for a replica's first burst of interactive traffic; a batch has
 * none, and its one-token streams would be sent to the engines for nothing).
 * The batch's own flags come after these defaults and override them.
 *
 * It waits for the ready target as `fleetgate wait` does, over the same `GET /fleet/status` (a
 * line on stderr each time a backend's state changes), then hands back the URL; `stop()` closes the
 * gateway, which stops every engine it launched.
 */
import type { FleetStatus } from '../admin/fleet-summary.js';
import { createGateway } from '../app.js';
import { sleepUnlessAborted } from '../batch/batch-runner.js';
import { formatDuration } from '../config/duration.js';
import { ConfigError, formatConfigError, loadConfig } from '../config/index.js';
import type { Config } from '../config/types.js';
import { fetchFleetStatus, UnreachableError } from '../http/fleet-status-client.js';
import { createLogger } from '../logging.js';
import { changeKey, type ReadyTarget, targetReached, waitLine } from './render-wait.js';

export interface InProcessOptions {
  mode: 'serve' | 'launch';
  /** `--config`, `--backend`, `--listen`, `--log-level`, `--set` as the user wrote them, in order. */
  argv: string[];
  /** Backends ready before the first request; null: the config's `min_ready` (at least 1). */
  ready: ReadyTarget | null;
  readyTimeoutMs: number;
  signal: AbortSignal;
}

export type InProcessStart =
  /** `apiKey`: the config's first `auth.api_keys` entry, for the batch's requests to pass its own key check. */
  | { ok: true; url: URL; apiKey: string | null; stop: () => Promise<void> }
  /** Nothing left running; `code` is the exit status. */
  | { ok: false; code: number; message: string };

/** Settings of a one-run gateway, before the user's flags (a later flag wins). */
const IN_PROCESS_DEFAULTS = [
  'listen=127.0.0.1:0',
  'log.level=warn',
  'log.destination=stderr',
  'log.access=false',
  'batch.enabled=false',
  'upstream.warm_up=false',
];

const POLL_MS = 500;
const STATUS_TIMEOUT_MS = 5000;

export async function startInProcess(opts: InProcessOptions): Promise<InProcessStart> {
  const argv = [...IN_PROCESS_DEFAULTS.flatMap((setting) => ['--set', setting]), ...opts.argv];
  let config: Config;
  try {
    config = loadConfig({ argv, env: process.env, cwd: process.cwd() }).config;
  } catch (error) {
    if (error instanceof ConfigError) return { ok: false, code: 2, message: formatConfigError(error) };
    throw error;
  }
  if (opts.mode === 'launch' && config.launch === null) {
    return {
      ok: false,
      code: 2,
      message: 'fleetgate batch --launch: the config has no launch: section (see config/examples/launch.yaml)',
    };
  }
  const gateway = await createGateway(config, { logger: createLogger(config.log), launch: opts.mode === 'launch' });
  let url: URL;
  try {
    url = new URL(`${await gateway.listen()}/`);
  } catch (error) {
    await gateway.close();
    return { ok: false, code: 1, message: `fleetgate batch: cannot listen: ${(error as Error).message}` };
  }
  const target = opts.ready ?? Math.max(1, config.min_ready);
  const waited = await waitReady(url, target, opts.readyTimeoutMs, opts.signal);
  if (waited !== null) {
    await gateway.close();
    return { ok: false, code: opts.signal.aborted ? 130 : 1, message: `fleetgate batch: ${waited} (nothing was sent)` };
  }
  return { ok: true, url, apiKey: config.auth.api_keys[0] ?? null, stop: () => gateway.close() };
}

/** Null once `target` backends are ready; else why not (timed out, or stopped by `signal`). */
async function waitReady(
  url: URL,
  target: ReadyTarget,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<string | null> {
  const deadline = Date.now() + timeoutMs;
  let lastKey: string | null = null;
  let last = 'no status read';
  while (!signal.aborted) {
    try {
      const status = await fetchFleetStatus<FleetStatus>(url, STATUS_TIMEOUT_MS);
      last = waitLine(status, target);
      if (targetReached(status, target)) return null;
      const key = changeKey(status);
      if (key !== lastKey) process.stderr.write(`fleetgate batch: waiting for backends: ${last}\n`);
      lastKey = key;
    } catch (error) {
      if (!(error instanceof UnreachableError)) throw error;
      last = error.message;
    }
    if (Date.now() >= deadline) return `backends not ready after ${formatDuration(timeoutMs)}: ${last}`;
    await sleepUnlessAborted(Math.min(POLL_MS, Math.max(0, deadline - Date.now())), signal);
  }
  return `stopped while waiting for backends: ${last}`;
}
