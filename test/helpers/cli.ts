/** `fleetgate` as a user runs it: the CLI spawned as a process (through tsx), with its output collected. */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';

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
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/index.ts', ...args], { env });
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
