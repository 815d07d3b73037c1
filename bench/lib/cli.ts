/** The command-line options both benches share, and their parsing. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { stamp } from './machine.js';
import { REPO_ROOT } from './sim-control.js';

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

/** The settings every bench run takes from the shared options; `name` names the results file. */
export function commonSettings(values: CommonValues, name: string) {
  const quick = values.quick === true;
  const pin = !values['no-pin'];
  return {
    runs: numberFlag(values.runs, 'runs', quick ? 1 : 3),
    quick,
    proxyCpu: pin ? numberFlag(values['proxy-cpu'], 'proxy-cpu', 0, 0) : null,
    clientCpu: pin ? numberFlag(values['client-cpu'], 'client-cpu', 1, 0) : null,
    out: values.out ?? join(REPO_ROOT, 'bench/results', `${name}-${stamp()}.json`),
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
