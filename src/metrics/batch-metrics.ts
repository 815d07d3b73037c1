/**
 * The Batch API's series: `fleetgate_batch_requests_total{status}` (completed, failed for good,
 * retried), `fleetgate_batch_jobs{status}` and `fleetgate_batch_store_up` (0 while the store's
 * database cannot be reached), read from the jobs at scrape time. Jobs run by
 * `fleetgate batch` in its own process are not counted here (their requests are, as traffic).
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { BatchRequestCounts } from '../batch/batch-jobs.js';
import { BATCH_STATUSES, type BatchStatus } from '../batch/batch-store.js';

export interface BatchSource {
  readonly counts: BatchRequestCounts;
  /** False while the jobs' store (the database) cannot be reached. */
  readonly storeReachable: boolean;
  countByStatus(): Partial<Record<BatchStatus, number>>;
}

export function registerBatchMetrics(registry: Registry, source: BatchSource): void {
  const seen: BatchRequestCounts = { completed: 0, failed: 0, retried: 0 };
  const requests: Counter<'status'> = new Counter({
    name: 'fleetgate_batch_requests_total',
    help: 'Requests of Batch API jobs by outcome: completed (in the output file), failed (in the error file, for good), retried (another attempt).',
    labelNames: ['status'] as const,
    registers: [registry],
    collect: () => {
      for (const status of Object.keys(seen) as Array<keyof BatchRequestCounts>) {
        const delta = source.counts[status] - seen[status];
        if (delta > 0) requests.inc({ status }, delta);
        seen[status] = source.counts[status];
      }
    },
  });
  for (const status of Object.keys(seen)) requests.inc({ status }, 0);
  const jobs: Gauge<'status'> = new Gauge({
    name: 'fleetgate_batch_jobs',
    help: 'Batch API jobs in batch.dir by status.',
    labelNames: ['status'] as const,
    registers: [registry],
    collect: () => {
      const counts = source.countByStatus();
      for (const status of BATCH_STATUSES) jobs.set({ status }, counts[status] ?? 0);
    },
  });
  const up: Gauge = new Gauge({
    name: 'fleetgate_batch_store_up',
    help: 'Whether the Batch API store answered its last call (0: its database cannot be reached; always 1 for batch.dir).',
    registers: [registry],
    collect: () => up.set(source.storeReachable ? 1 : 0),
  });
}
