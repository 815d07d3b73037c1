/**
 * Every verb reads its flags the same way: node:util `parseArgs`, strict, with `-h`/`--help`. A bad
 * flag or value prints `fleetgate VERB: <problem>`, a blank line and the verb's usage on stderr
 * (exit 2); `--help` prints the usage on stdout (exit 0). One helper, so the verbs cannot drift.
 */
import { type ParseArgsConfig, parseArgs } from 'node:util';

/** A bad flag value, found by a verb's own checks: answered like a flag `parseArgs` refused. */
export class UsageError extends Error {}

type Options = NonNullable<ParseArgsConfig['options']>;
const HELP = { help: { type: 'boolean', short: 'h' } } as const;

/** `argv` against `options` plus `-h/--help`, strict; throws a usage error (`ERR_PARSE_ARGS_*`) on a bad flag. */
export function readFlags<const O extends Options, const P extends boolean = false>(
  argv: string[],
  options: O,
  allowPositionals?: P,
) {
  return parseArgs({
    args: argv,
    options: { ...options, ...HELP },
    strict: true as const,
    allowPositionals: (allowPositionals ?? false) as P,
    tokens: true as const,
  });
}

/** A usage error or a parseArgs refusal: the user's mistake, not fleetgate's. */
export function isUsageError(error: unknown): error is Error {
  return error instanceof UsageError || String((error as { code?: unknown })?.code).startsWith('ERR_PARSE_ARGS');
}

/** Writes `problem` and the usage to stderr; returns the exit status of a usage error, 2. */
function usageExit(verb: string, problem: string, usage: string): 2 {
  process.stderr.write(`fleetgate ${verb}: ${problem}\n\n${usage}`);
  return 2;
}

/**
 * The verb's arguments from `parse` (null: `--help` was given), or its exit status when it ends
 * here: 0 after printing the usage, 2 after a usage error.
 */
export function verbArgs<T>(verb: string, usage: string, parse: () => T | null): T | number {
  let parsed: T | null;
  try {
    parsed = parse();
  } catch (error) {
    if (!isUsageError(error)) throw error;
    return usageExit(verb, error.message, usage);
  }
  if (parsed === null) {
    process.stdout.write(usage);
    return 0;
  }
  return parsed;
}
