/**
 * One `fleetgate sim` server as a child process, so a test can kill it the way a GPU server dies:
 * SIGKILL, the kernel closing its sockets mid-stream. Killed after the test if still alive.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import type { TestContext } from 'node:test';
import { request } from 'undici';
import { fleetgateEntry, REPO } from './cli-entry.js';
import { freePort } from './net.js';
import { waitFor } from './wait.js';

export interface SimProcess {
  name: string;
  url: string;
  child: ChildProcess;
  /** SIGKILL; resolves once the process is gone. */
  kill(): Promise<void>;
}

/** Starts `fleetgate sim --speed fast` named `name` with `args`; resolves once its `/health` answers 200. */
export async function startSimProcess(t: Pick<TestContext, 'after'>, name: string, args: string[] = []) {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [...fleetgateEntry(), 'sim', '--port', String(port), '--name', name, '--speed', 'fast', '--quiet', ...args],
    { cwd: REPO, stdio: 'ignore' },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const kill = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  };
  t.after(kill);
  const url = `http://127.0.0.1:${port}`;
  await waitFor(
    async () => {
      const res = await request(`${url}/health`);
      await res.body.dump();
      return res.statusCode === 200;
    },
    { what: `sim ${name} healthy`, timeoutMs: 30_000, intervalMs: 100 },
  );
  return { name, url, child, kill } satisfies SimProcess;
}
