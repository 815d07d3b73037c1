/**
 * Several `fleetgate serve` processes over the same simulated backends, as a Deployment's replicas
 * run behind one Service: each a real child process (cli-entry.ts) with its own config file and
 * port, killed with SIGKILL after the test if still running.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import type { SimServer } from '../../src/sim/index.js';
import { fleetgateEntry, REPO } from './cli-entry.js';
import { freePorts } from './net.js';
import { waitFor } from './wait.js';

export interface Replica {
  url: string;
  child: ChildProcess;
  /** stdout and stderr so far. */
  output: () => string;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
}

/** `fleetgate serve --config CONFIG --listen 127.0.0.1:PORT` as a child process in `cwd`, its output kept. */
export function spawnServe(config: string, port: number, cwd: string = REPO): Replica {
  const child = spawn(
    process.execPath,
    [...fleetgateEntry(), 'serve', '--config', config, '--listen', `127.0.0.1:${port}`],
    {
      cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  const keep = (chunk: string) => {
    out += chunk;
  };
  child.stdout?.setEncoding('utf8').on('data', keep);
  child.stderr?.setEncoding('utf8').on('data', keep);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { url: `http://127.0.0.1:${port}`, child, output: () => out, exited };
}

/** The YAML every replica runs: the sims as backends named like them, then `extra` (top-level YAML). */
export function replicaYaml(sims: SimServer[], extra: string): string {
  const backends = sims.map((sim) => `  - url: ${sim.url}\n    name: ${sim.name}\n`).join('');
  return `backends:\n${backends}health:\n  starting_interval: 100ms\n  interval: 500ms\nlog:\n  level: warn\n  access: false\n${extra}`;
}

export async function readyz(url: string): Promise<number> {
  const res = await fetch(`${url}/readyz`);
  await res.arrayBuffer();
  return res.status;
}

/** Starts `count` replicas with the same config and waits until each one's /readyz says 200. */
export async function startReplicas(
  t: Pick<TestContext, 'after'>,
  count: number,
  sims: SimServer[],
  extra = '',
): Promise<Replica[]> {
  const dir = await mkdtemp(join(tmpdir(), 'fleetgate-replicas-'));
  const file = join(dir, 'fleetgate.yaml');
  await writeFile(file, replicaYaml(sims, extra));
  const ports = await freePorts(count);
  const replicas = ports.map((port) => spawnServe(file, port));
  t.after(async () => {
    for (const replica of replicas)
      if (replica.child.exitCode === null && replica.child.signalCode === null) replica.child.kill('SIGKILL');
    await Promise.all(replicas.map((replica) => replica.exited));
    await rm(dir, { recursive: true, force: true });
  });
  for (const replica of replicas) {
    await waitFor(async () => (await readyz(replica.url)) === 200, {
      timeoutMs: 60_000,
      what: `replica ${replica.url} ready: ${replica.output()}`,
    });
  }
  return replicas;
}
