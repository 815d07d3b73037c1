/**
 * `fleetgate wait`: blocks until enough backends are ready, for scripts
 * (`fleetgate wait --ready all --timeout 10m && python generate.py`). Polls `GET /fleet/status`;
 * fleetgate itself may not be up yet, so refusals are retried until the timeout.
 */
import type { FleetStatus } from '../admin/fleet-summary.js';
import { formatDuration, parseDuration } from '../config/duration.js';
import { fetchFleetStatus, UnreachableError } from '../http/fleet-status-client.js';
import { DEFAULT_URL, resolveBaseUrl, UrlError } from './fleetgate-url.js';
import { colorEnabled, truncate } from './render-status.js';
import {
  changeKey,
  failedBackends,
  parseReadyTarget,
  type ReadyTarget,
  targetReached,
  timestamp,
  waitFrame,
  waitLine,
} from './render-wait.js';
import { readFlags, UsageError, verbArgs } from './verb-args.js';

export const USAGE = `usage: fleetgate wait [--url URL] [--ready N|all] [--timeout DUR] [--fail-fast]

Blocks until backends are ready, showing live progress (bars on a terminal, timestamped lines
when piped). Keeps retrying while fleetgate itself is not reachable yet.

options:
  --url URL      fleetgate to ask (default: $FLEETGATE_URL, else ${DEFAULT_URL})
  --ready N|all  how many backends must be ready; all = every backend not drained (default: all)
  --timeout DUR  give up after DUR, e.g. 90s, 10m, 1h; 0 checks once (default: wait forever)
  --fail-fast    exit 3 as soon as a backend is failed (default: keep waiting, it may be restarted)
  -h, --help     this text

exit status: 0 ready, 1 timed out, 2 usage error, 3 a backend failed (with --fail-fast)

example: fleetgate wait --ready all --timeout 10m && python generate.py
`;

const POLL_MS = 500;
const REQUEST_TIMEOUT_MS = 5000;
/** When only progress moved, a piped log gets a line at most this often. */
const PROGRESS_LINE_MS = 10_000;

interface WaitArgs {
  base: URL;
  target: ReadyTarget;
  timeoutMs: number | null;
  failFast: boolean;
}

/** The parsed arguments, or the usage message to print (exit 2), or null for `--help`. */
export function parseWaitArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): WaitArgs | string | null {
  let values: { url?: string; ready?: string; timeout?: string; 'fail-fast'?: boolean; help?: boolean };
  try {
    ({ values } = readFlags(argv, {
      url: { type: 'string' },
      ready: { type: 'string' },
      timeout: { type: 'string' },
      'fail-fast': { type: 'boolean' },
    }));
  } catch (error) {
    return (error as Error).message;
  }
  if (values.help) return null;
  const target = parseReadyTarget(values.ready ?? 'all');
  if (target === null) return `--ready must be a positive whole number or 'all', got '${values.ready}'`;
  let timeoutMs: number | null = null;
  if (values.timeout !== undefined) {
    timeoutMs = parseDuration(values.timeout);
    if (timeoutMs === null) {
      return `--timeout must be a duration with a unit such as 500ms, 90s, 10m or 1h, got '${values.timeout}'`;
    }
  }
  let base: URL;
  try {
    base = resolveBaseUrl(values.url, env);
  } catch (error) {
    if (error instanceof UrlError) return error.message;
    throw error;
  }
  return { base, target, timeoutMs, failFast: values['fail-fast'] === true };
}

/** How progress reaches the person: live bars on a TTY, change-only lines otherwise. */
interface Reporter {
  update(status: FleetStatus | null, error: string | null): void;
  /** The last words (after a final frame of `status`): `ok` to stdout, the rest to stderr. */
  finish(line: string, ok: boolean, status: FleetStatus | null): void;
}

function lineReporter(args: WaitArgs): Reporter {
  let lastKey: string | null = null;
  let lastLine = '';
  let lastAt = 0;
  let lastError: string | null = null;
  const print = (text: string, stream: NodeJS.WriteStream = process.stdout) =>
    stream.write(`${timestamp(new Date())}${text}\n`);
  return {
    update(status, error) {
      if (status === null) {
        if (error !== null && error !== lastError) print(`waiting for fleetgate: ${error}`);
        lastError = error;
        return;
      }
      lastError = null;
      const key = changeKey(status);
      const line = waitLine(status, args.target);
      const now = Date.now();
      if (key !== lastKey || (line !== lastLine && now - lastAt >= PROGRESS_LINE_MS)) {
        print(line);
        lastKey = key;
        lastLine = line;
        lastAt = now;
      }
    },
    finish(line, ok) {
      print(line, ok ? process.stdout : process.stderr);
    },
  };
}

function ttyReporter(args: WaitArgs, startedAt: number): Reporter {
  const out = process.stdout;
  const color = colorEnabled(out);
  let drawn = 0;
  const draw = (frame: string[]) => {
    // A frame taller than the screen cannot be redrawn in place.
    const rows = out.rows || 24;
    const lines = frame.length < rows ? frame : [...frame.slice(0, rows - 2), `… ${frame.length - rows + 2} more`];
    // Back to the first line of the previous frame, clear to the end of the screen, draw again.
    const back = drawn > 0 ? `\x1b[${drawn}F\x1b[J` : '';
    out.write(`${back}${lines.join('\n')}\n`);
    drawn = lines.length;
  };
  out.write('\x1b[?25l');
  const showCursor = () => out.write('\x1b[?25h');
  const interrupted = () => {
    showCursor();
    process.exit(130);
  };
  process.once('exit', showCursor);
  process.once('SIGINT', interrupted);
  const frame = (status: FleetStatus | null, error: string | null) =>
    draw(
      waitFrame(status, {
        target: args.target,
        color,
        width: out.columns || 80,
        elapsedMs: Date.now() - startedAt,
        timeoutMs: args.timeoutMs,
        error,
      }),
    );
  return {
    update: frame,
    finish(line, ok, status) {
      if (status !== null) frame(status, null);
      showCursor();
      process.off('exit', showCursor);
      process.off('SIGINT', interrupted);
      (ok ? out : process.stderr).write(`${timestamp(new Date())}${line}\n`);
    },
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export async function run(argv: string[]): Promise<number> {
  const args = verbArgs('wait', USAGE, () => {
    const parsed = parseWaitArgs(argv);
    if (typeof parsed === 'string') throw new UsageError(parsed);
    return parsed;
  });
  if (typeof args === 'number') return args;
  const startedAt = Date.now();
  const deadline = args.timeoutMs === null ? Number.POSITIVE_INFINITY : startedAt + args.timeoutMs;
  const reporter = process.stdout.isTTY ? ttyReporter(args, startedAt) : lineReporter(args);
  let last: FleetStatus | null = null;
  for (;;) {
    const remaining = deadline - Date.now();
    let error: string | null = null;
    try {
      // `--timeout 0` still gets one real attempt.
      last = await fetchFleetStatus<FleetStatus>(
        args.base,
        remaining > 0 ? Math.min(remaining, REQUEST_TIMEOUT_MS) : 2000,
      );
    } catch (caught) {
      if (!(caught instanceof UnreachableError)) throw caught;
      error = caught.message;
    }
    const status = error === null ? last : null;
    if (status !== null && targetReached(status, args.target)) {
      reporter.finish(waitLine(status, args.target), true, status);
      return 0;
    }
    if (status !== null && args.failFast) {
      const failed = failedBackends(status);
      if (failed.length > 0) {
        const which = failed.map((b) => `${b.name} failed: ${truncate(b.reason ?? 'unknown reason', 200)}`).join('; ');
        reporter.finish(`${which} (--fail-fast; ${status.ready}/${status.backends.length} ready)`, false, status);
        return 3;
      }
    }
    reporter.update(status, error);
    if (Date.now() >= deadline) {
      const after = `timed out after ${formatDuration(args.timeoutMs ?? 0)}`;
      const where = last === null ? error : `${waitLine(last, args.target)}${error === null ? '' : ` (${error})`}`;
      reporter.finish(`${after}: ${where}`, false, status);
      return 1;
    }
    await sleep(Math.min(POLL_MS, Math.max(0, deadline - Date.now())));
  }
}
