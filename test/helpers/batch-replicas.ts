/**
 * fleetgate replicas for the shared Batch API: each a `fleetgate serve` child process in a working
 * directory of its own (as pods have: `batch.dir` is never shared), with the same config, killed
 * with SIGKILL after the test if still running.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SimServer } from '../../src/sim/index.js';
import { freePorts } from './net.js';
import { readyz, replicaYaml } from './replicas.js';
import { waitFor } from './wait.js';

type After = { after(fn: () => unknown): void };

export interface BatchReplica {
  url: string;
  dir: string;
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

const CLI = join(import.meta.dirname, '../../src/cli/index.ts');
const TSX = import.meta.resolve('tsx');

/** One replica in a new working directory, ready (its /readyz 200). */
export async function startBatchReplica(t: After, sims: SimServer[], extra: string): Promise<BatchReplica> {
  const dir = mkdtempSync(join(tmpdir(), 'fleetgate-replica-'));
  writeFileSync(join(dir, 'fleetgate.yaml'), replicaYaml(sims, extra));
  const [port] = (await freePorts(1)) as [number];
  const child = spawn(
    process.execPath,
    ['--import', TSX, CLI, 'serve', '--config', 'fleetgate.yaml', '--listen', `127.0.0.1:${port}`],
    { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const replica = { url: `http://127.0.0.1:${port}`, dir, child, output: () => out, exited };
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  });
  await waitFor(async () => (await readyz(replica.url).catch(() => 0)) === 200, {
    timeoutMs: 60_000,
    what: `replica ${replica.url} ready: ${out}`,
  });
  return replica;
}

/** `count` replicas, started together. */
export function startBatchReplicas(t: After, count: number, sims: SimServer[], extra: string): Promise<BatchReplica[]> {
  return Promise.all(Array.from({ length: count }, () => startBatchReplica(t, sims, extra)));
}
