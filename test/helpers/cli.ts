/** `fleetgate` as a user runs it: the CLI spawned as a process (cli-entry.ts), with its output collected. */
import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { BUILT_CLI, builtIsCurrent, fleetgateEntry } from './cli-entry.js';

/** The environment without colour switches, so a test sets the ones it is about. */
export function plainEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const { FORCE_COLOR: _force, NO_COLOR: _no, ...env } = process.env;
  return { ...env, ...extra };
}

export interface CliProcess {
  child: ChildProcessWithoutNullStreams;
  /** stdout and stderr so far, interleaved. */
  output: () => string;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the exit code (null when killed by a signal) once both streams closed. */
  closed: Promise<number | null>;
}

export function spawnCli(args: string[], env: NodeJS.ProcessEnv = plainEnv()): CliProcess {
  return spawnNode([...fleetgateEntry(), ...args], env);
}

/**
 * `fleetgate` as installed and as the image runs it: `node dist/cli/index.js`, without tsx's loader
 * (~30 MB of resident memory), for a test that measures the process. `npm ci` builds dist/ (the
 * `prepare` script); a dist/ older than src/ fails the test rather than measure stale code.
 */
export function spawnBuiltCli(args: string[], env: NodeJS.ProcessEnv = plainEnv()): CliProcess {
  assert.ok(builtIsCurrent(), `${BUILT_CLI} is missing or older than src/: run npm run build`);
  return spawnNode([BUILT_CLI, ...args], env);
}

function spawnNode(nodeArgs: string[], env: NodeJS.ProcessEnv): CliProcess {
  const child = spawn(process.execPath, nodeArgs, { env });
  child.stdin.end();
  let output = '';
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
    output += chunk;
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
    output += chunk;
  });
  const closed = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return { child, output: () => output, stdout: () => stdout, stderr: () => stderr, closed };
}

/** Every verb of `fleetgate`; cli-usage.test.ts checks it against the commands `fleetgate --help` lists. */
export const VERBS = ['serve', 'launch', 'status', 'wait', 'drain', 'resume', 'restart', 'demo', 'sim', 'batch'];

/** `fleetgate VERB FLAG` exits 0 with the verb's usage on stdout and nothing on stderr; returns the usage. */
export async function usageOf(verb: string, flag: string): Promise<string> {
  // serve: after other flags too; it starts nothing (the usage is all it prints, then it exits).
  const run = spawnCli(verb === 'serve' ? [verb, '--listen', '127.0.0.1:0', flag] : [verb, flag]);
  const code = await run.closed;
  assert.equal(code, 0, `fleetgate ${verb} ${flag}: exit ${code}, stderr ${run.stderr()}`);
  assert.equal(run.stderr(), '', `fleetgate ${verb} ${flag} writes nothing to stderr`);
  assert.match(run.stdout(), new RegExp(`^usage: fleetgate ${verb} `), `fleetgate ${verb} ${flag}`);
  return run.stdout();
}

/** The usage of every verb for `flag`, two processes at a time (each compiles TypeScript on a shared machine). */
export async function usageOfEveryVerb(flag: string): Promise<Map<string, string>> {
  const usages = new Map<string, string>();
  for (let i = 0; i < VERBS.length; i += 2) {
    await Promise.all(VERBS.slice(i, i + 2).map(async (verb) => usages.set(verb, await usageOf(verb, flag))));
  }
  return usages;
}
