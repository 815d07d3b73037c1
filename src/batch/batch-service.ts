/**
 * The Batch API as one piece for the composition root: storage under `batch.dir`, the jobs, their
 * routes, and the client that sends their requests to fleetgate's own listener (so they take the
 * whole traffic path: the `batch` priority class, queues, retries, metrics). Jobs start once
 * fleetgate listens and stop, resumable, before it closes.
 */
import { resolve } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config/types.js';
import { loopbackOrigin } from '../http/loopback.js';
import type { Tracing } from '../tracing/tracing.js';
import { BatchJobs } from './batch-jobs.js';
import { registerBatchRoutes } from './batch-routes.js';
import { BatchSender } from './batch-sender.js';
import { BatchStore } from './batch-store.js';
import { fleetViewReader } from './fleet-view-client.js';

export interface BatchService {
  readonly jobs: BatchJobs;
  /** Begins (and resumes) jobs, sending to fleetgate's own port. */
  start(port: number): void;
  stop(): Promise<void>;
}

/** The lowest priority class, `batch` when there is one: interactive requests overtake the jobs. */
function batchClass(config: Config): string | null {
  const names = config.queue.classes.map((c) => c.name);
  return names.includes('batch') ? 'batch' : (names.at(-1) ?? null);
}

/** Null when `batch.enabled` is false: the paths then go to the backends like any other. */
export function createBatchService(
  app: FastifyInstance,
  config: Config,
  onError: (batchId: string, error: unknown) => void,
  tracing: Tracing | null = null,
): BatchService | null {
  if (!config.batch.enabled) return null;
  const store = new BatchStore(resolve(config.batch.dir));
  const jobs = new BatchJobs({ store, maxFileSize: config.batch.max_file_size, onError, tracing });
  registerBatchRoutes(app, { jobs, store, config: () => config });
  let sender: BatchSender | null = null;
  return {
    jobs,
    start(port) {
      const base = new URL(`${loopbackOrigin(config.listen.host, port)}/`);
      sender = new BatchSender({
        base,
        priorityClass: batchClass(config),
        apiKey: config.auth.api_keys[0] ?? null,
        timeoutMs: config.upstream.headers_timeout || 60 * 60_000,
        connections: 1024,
      });
      jobs.start({ send: sender.send, fetchStatus: fleetViewReader(base) });
    },
    async stop() {
      await jobs.stop();
      // close() may run twice (a test's hook, then the signal path): the agent closes once.
      const closing = sender;
      sender = null;
      await closing?.close();
    },
  };
}
