/**
 * fleetgate replicas for the shared Batch API: each a `fleetgate serve` child process in a working
 * directory of its own (as pods have: `batch.dir` is never shared), with the same config, killed
 * with SIGKILL after the test if still running.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { request } from 'undici';
import type { SimServer } from '../../src/sim/index.js';
import { assertCompleteOutput, type OutputLine, tempDir, writeChatInput } from './batch.js';
import { createSims } from './fleet.js';
import { freePorts } from './net.js';
import { type PgCluster, startPostgres } from './postgres.js';
import { type Replica, readyz, replicaYaml, spawnServe } from './replicas.js';
import { waitFor } from './wait.js';

type After = { after(fn: () => unknown): void };

export interface BatchReplica extends Replica {
  dir: string;
}

/** One replica in a new working directory, ready (its /readyz 200). */
export async function startBatchReplica(t: After, sims: SimServer[], extra: string): Promise<BatchReplica> {
  const dir = mkdtempSync(join(tmpdir(), 'fleetgate-replica-'));
  writeFileSync(join(dir, 'fleetgate.yaml'), replicaYaml(sims, extra));
  const [port] = (await freePorts(1)) as [number];
  const replica = { ...spawnServe('fleetgate.yaml', port, dir), dir };
  const { child, exited } = replica;
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  });
  await waitFor(async () => (await readyz(replica.url).catch(() => 0)) === 200, {
    timeoutMs: 60_000,
    what: `replica ${replica.url} ready: ${replica.output()}`,
  });
  return replica;
}

/** `count` replicas, started together. */
export function startBatchReplicas(t: After, count: number, sims: SimServer[], extra: string): Promise<BatchReplica[]> {
  return Promise.all(Array.from({ length: count }, () => startBatchReplica(t, sims, extra)));
}

/** Requests in a fault test's job, and the replicas' `batch.lease`. */
export const COUNT = 900;
export const LEASE_MS = 3000;

export interface SharedSetup {
  cluster: PgCluster;
  db: pg.Client;
  sims: Awaited<ReturnType<typeof createSims>>;
  replicas: BatchReplica[];
}

/** PostgreSQL, two sims and `replicas` replicas sharing one database; a client of it for the test (not connected with `stopDatabase`). */
export async function setUpShared(t: After, replicas: number, { stopDatabase = false } = {}): Promise<SharedSetup> {
  const cluster = await startPostgres(t);
  const url = await cluster.createDatabase();
  const sims = await createSims(t, [
    { engine: { tokenMs: 4, maxRunningRequests: 24 } },
    { engine: { tokenMs: 4, maxRunningRequests: 24 } },
  ]);
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady()));
  // Down before the replicas start: they come up without it.
  if (stopDatabase) await cluster.stop();
  const started = await startBatchReplicas(
    t,
    replicas,
    sims,
    `routing:\n  replicas: ${replicas}\nbatch:\n  database_url: ${url}\n  lease: ${LEASE_MS}ms\n`,
  );
  const db = new pg.Client(url);
  db.on('error', () => {});
  if (!stopDatabase) await db.connect();
  t.after(() => db.end().catch(() => {}));
  return { cluster, db, sims, replicas: started };
}

export async function post(url: string, path: string, body: unknown): Promise<{ status: number; json: unknown }> {
  const res = await request(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.statusCode, json: await res.body.json() };
}

export async function get(url: string, path: string): Promise<{ status: number; text: string }> {
  const res = await request(`${url}${path}`);
  return { status: res.statusCode, text: await res.body.text() };
}

/** Uploads `COUNT` chat requests through `replica` and creates a batch of them there. */
export async function createJob(t: After, replica: BatchReplica): Promise<string> {
  const input = readFileSync(writeChatInput(tempDir(t), COUNT, 4));
  const form = new FormData();
  form.append('purpose', 'batch');
  form.append('file', new Blob([input]), 'input.jsonl');
  const uploaded = await fetch(`${replica.url}/v1/files`, { method: 'POST', body: form });
  assert.equal(uploaded.status, 200);
  const file = (await uploaded.json()) as { id: string };
  const created = await post(replica.url, '/v1/batches', {
    input_file_id: file.id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  });
  assert.equal(created.status, 200, JSON.stringify(created.json));
  return (created.json as { id: string }).id;
}

/** Answers stored for job `id`. */
export async function storedAnswers(db: pg.Client, id: string): Promise<number> {
  const { rows } = await db.query('SELECT count(*)::int AS n FROM batch_results WHERE batch_id = $1 AND ok', [id]);
  return (rows[0] as { n: number }).n;
}

/** The replica whose pid is in the job's lease. */
export async function leaseHolder(db: pg.Client, id: string, replicas: BatchReplica[]): Promise<BatchReplica | null> {
  const { rows } = await db.query('SELECT lease_owner FROM batch_jobs WHERE id = $1', [id]);
  const owner = (rows[0] as { lease_owner: string | null } | undefined)?.lease_owner ?? '';
  return replicas.find((r) => owner.split('/')[1] === String(r.child.pid)) ?? null;
}

/** Waits for the job to complete (read through `replica`); checks its output holds every custom_id once. */
export async function assertCompletes(replica: BatchReplica, id: string, timeoutMs: number): Promise<void> {
  const batch = await waitFor(
    async () => {
      const res = await get(replica.url, `/v1/batches/${id}`);
      const b = JSON.parse(res.text) as { status: string; output_file_id: string; request_counts: unknown };
      return b.status === 'completed' ? b : null;
    },
    { timeoutMs, intervalMs: 100, what: `batch ${id} completed` },
  );
  assert.deepEqual(batch.request_counts, { total: COUNT, completed: COUNT, failed: 0 });
  const content = await get(replica.url, `/v1/files/${batch.output_file_id}/content`);
  assertCompleteOutput(
    content.text
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as OutputLine),
    COUNT,
  );
}
