/** What both benches share: command-line options, the start of a run, the JSON results, the runner. */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describeMachine, type Machine, machineLine, stamp } from './machine.js';
import { waitQuiet } from './proc-stats.js';
import { haveTaskset, pinSelf } from './procs.js';
import { REPO_ROOT } from './sim-control.js';
import { HAPROXY, missingBinaries, NGINX, type TargetKind } from './targets.js';

export const COMMON_OPTIONS = {
  runs: { type: 'string' },
  quick: { type: 'boolean' },
  targets: { type: 'string' },
  'proxy-cpu': { type: 'string' },
  'client-cpu': { type: 'string' },
  'no-pin': { type: 'boolean' },
  out: { type: 'string' },
  keep: { type: 'boolean' },
  'quiet-wait': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

export interface CommonValues {
  runs?: string;
  quick?: boolean;
  'proxy-cpu'?: string;
  'client-cpu'?: string;
  'no-pin'?: boolean;
  out?: string;
  keep?: boolean;
  'quiet-wait'?: string;
}

/** `--flag N`: a number >= min (an integer unless `fractional`), or the fallback when absent. */
export function numberFlag(text: string | undefined, flag: string, fallback: number, min = 1, fractional = false) {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!(fractional ? Number.isFinite(n) : Number.isInteger(n)) || n < min) {
    throw new Error(`--${flag}: '${text}' must be ${fractional ? 'a number' : 'an integer'} >= ${min}`);
  }
  return n;
}

/**
 * Where a run's JSON goes unless `--out` says otherwise: ignored by git (.gitignore), so a bench run
 * leaves the tree clean. A run a doc cites is copied into bench/results/ by hand (docs/benchmarks.md).
 */
export const RAW_RESULTS_DIR = join(REPO_ROOT, 'bench/results/raw');

/** The settings every bench run takes from the shared options; `name` names the results file. */
export function commonSettings(values: CommonValues, name: string) {
  const quick = values.quick === true;
  const pin = !values['no-pin'];
  return {
    runs: numberFlag(values.runs, 'runs', quick ? 1 : 3),
    quick,
    proxyCpu: pin ? numberFlag(values['proxy-cpu'], 'proxy-cpu', 0, 0) : null,
    clientCpu: pin ? numberFlag(values['client-cpu'], 'client-cpu', 1, 0) : null,
    out: values.out ?? join(RAW_RESULTS_DIR, `${name}-${stamp()}.json`),
    keep: values.keep === true,
    // Other sessions may be busy on this machine: wait (up to this long) for it to calm down before each measurement.
    quietWaitMs: numberFlag(values['quiet-wait'], 'quiet-wait', quick ? 0 : 20, 0, true) * 1000,
  };
}

/** Writes a bench run's JSON results: what ran, when, for how long, then the bench's own fields. */
export function writeResults(out: string, bench: string, startedMs: number, fields: Record<string, unknown>): void {
  const durationSec = Math.round((Date.now() - startedMs) / 1000);
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify({ bench, date: new Date().toISOString(), durationSec, ...fields }, null, 2)}\n`);
}

/** Runs a bench's main and exits with its code at once, rather than wait for idle keep-alive sockets. */
export function runBench(name: string, main: (argv: string[]) => Promise<number>): void {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`${name}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = 1;
    },
  );
}

export interface BenchStart<O> {
  opts: O;
  machine: Machine;
  /** A fresh temporary directory for configs and logs. */
  work: string;
  progress: (line: string) => void;
}

/**
 * Parses the command line (`--help`: usage, exit 0; bad flags: message and usage, exit 2), checks
 * that the proxies it needs are installed, pins this process to the client core and makes the work
 * directory. A number is the exit code when the run cannot start.
 */
export function startBench<O extends { clientCpu: number | null }>(
  name: string,
  usage: string,
  argv: string[],
  parse: (argv: string[]) => O | null,
  kinds: (opts: O) => Iterable<TargetKind>,
): BenchStart<O> | number {
  let opts: O | null;
  try {
    opts = parse(argv);
  } catch (error) {
    process.stderr.write(`bench:${name}: ${(error as Error).message}\n\n${usage}`);
    return 2;
  }
  if (opts === null) {
    process.stdout.write(usage);
    return 0;
  }
  const missing = missingBinaries(kinds(opts));
  if (missing.length > 0) {
    process.stderr.write(`bench:${name}: ${missing.join('; ')}\n`);
    return 2;
  }
  const progress = (line: string) => process.stderr.write(`[${name}] ${line}\n`);
  if (opts.clientCpu !== null && !haveTaskset()) progress('taskset not found: processes are not pinned');
  pinSelf(opts.clientCpu);
  const machine = describeMachine(NGINX, HAPROXY, REPO_ROOT);
  const work = mkdtempSync(join(tmpdir(), `fleetgate-bench-${name}-`));
  progress(`${machineLine(machine)}; work dir ${work}`);
  return { opts, machine, work, progress };
}

/**
 * Targets in the order run `run` (from 1) measures them: reversed every other run, so a machine that
 * speeds up or slows down during a run does not always favour the same targets.
 */
export function inRunOrder<T>(targets: readonly T[], run: number): T[] {
  return run % 2 === 1 ? [...targets] : [...targets].reverse();
}

/** Before a measurement: wait (up to `quietWaitMs`) for other load on the machine to settle. */
export async function settle(quietWaitMs: number, progress: (line: string) => void): Promise<void> {
  const busy = quietWaitMs > 0 ? await waitQuiet(0.15, quietWaitMs) : 0;
  if (busy > 0.15) progress(`machine still busy (${busy.toFixed(2)} cores); measuring anyway`);
}
