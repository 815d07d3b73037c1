/**
 * The Batch API as one piece for the composition root: its store (PostgreSQL with
 * `batch.database_url`, else `batch.dir`), the jobs, their
 * routes, and the client that sends their requests to fleetgate's own listener (so they take the
 * whole traffic path: the `batch` priority class, queues, retries, metrics). Jobs start once
 * fleetgate listens and stop, resumable, before it closes.
 */
import { resolve } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config/types.js';
import { fetchFleetStatus } from '../http/fleet-status-client.js';
import { loopbackOrigin } from '../http/loopback.js';
import type { Tracing } from '../tracing/tracing.js';
import { batchClassAmong, type FleetView } from './auto-concurrency.js';
import { BatchJobs } from './batch-jobs.js';
import { registerBatchRoutes } from './batch-routes.js';
import { BatchSender } from './batch-sender.js';
import type { BatchStore } from './batch-store.js';
import { DirStore } from './dir-store.js';

export interface BatchService {
  readonly jobs: BatchJobs;
  /** Begins (and resumes) jobs, sending to fleetgate's own port. */
  start(port: number): void;
  stop(): Promise<void>;
}

export interface BatchServiceLog {
  /** A job hit a problem (a crash of its run). */
  jobError(batchId: string, error: unknown): void;
  warn(message: string): void;
}

/** Why the Batch API refuses to work without a database: each replica would keep its own jobs. */
const REPLICAS_NEED_DATABASE =
  'the Batch API needs batch.database_url when routing.replicas is above 1: without a shared database each replica keeps its own files and jobs';

/**
 * Null when `batch.enabled` is false: the paths then go to the backends like any other. The
 * PostgreSQL client is loaded only with `batch.database_url` (~14 MB of resident memory otherwise).
 */
export async function createBatchService(
  app: FastifyInstance,
  config: Config,
  log: BatchServiceLog,
  tracing: Tracing | null = null,
): Promise<BatchService | null> {
  if (!config.batch.enabled) return null;
  const { database_url, dir, lease } = config.batch;
  const refusal = database_url === null && config.routing.replicas > 1 ? REPLICAS_NEED_DATABASE : null;
  if (refusal !== null) log.warn(`${refusal}; its endpoints answer 503`);
  const store: BatchStore =
    database_url === null
      ? new DirStore(resolve(dir))
      : new (await import('./pg-store.js')).PgStore(database_url, resolve(dir, 'cache'));
  const jobs = new BatchJobs({
    store,
    maxFileSize: config.batch.max_file_size,
    leaseMs: lease,
    onError: log.jobError,
    tracing,
  });
  registerBatchRoutes(app, { jobs, store, config: () => config, refusal });
  let sender: BatchSender | null = null;
  return {
    jobs,
    start(port) {
      if (refusal !== null) return;
      const base = new URL(`${loopbackOrigin(config.listen.host, port)}/`);
      sender = new BatchSender({
        base,
        priorityClass: batchClassAmong(config.queue.classes.map((c) => c.name)),
        apiKey: config.auth.api_keys[0] ?? null,
        timeoutMs: config.upstream.headers_timeout || 60 * 60_000,
        connections: 1024,
        streamUpstream: config.batch.stream_upstream,
      });
      jobs.start({ send: sender.send, fetchStatus: () => fetchFleetStatus<FleetView>(base) });
    },
    async stop() {
      await jobs.stop();
      // close() may run twice (a test's hook, then the signal path): the agent closes once.
      const closing = sender;
      sender = null;
      await closing?.close();
      await store.close();
    },
  };
}
