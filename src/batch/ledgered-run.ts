/**
 * One run of a batch against its files, for `fleetgate batch` and the Batch API alike: opens the
 * output ledger (resuming: the `custom_id`s in it are skipped), starts the errors file afresh (a
 * request that failed for good in an earlier run is tried again), sends the rest, and closes both
 * files synced.
 */
import type { BatchRequest } from './batch-input.js';
import { type RunnerEvent, type RunnerSummary, runBatch } from './batch-runner.js';
import type { Send } from './batch-sender.js';
import { type LedgerOptions, OutputLedger } from './output-ledger.js';

export interface LedgeredRunOptions {
  requests: readonly BatchRequest[];
  outputPath: string;
  errorsPath: string;
  send: Send;
  limit: () => number;
  maxAttempts: number;
  signal?: AbortSignal;
  /** Called once the ledger is read: how many are already written. */
  resumed?: (alreadyDone: number, droppedBytes: number) => void;
  observe?: (event: RunnerEvent) => void;
  ledger?: LedgerOptions;
  backoff?: (failures: number) => number;
}

export interface LedgeredRunResult extends RunnerSummary {
  total: number;
  /** Written by earlier runs. */
  alreadyDone: number;
}

export async function runLedgered(opts: LedgeredRunOptions): Promise<LedgeredRunResult> {
  const output = new OutputLedger(opts.outputPath, opts.ledger);
  let errors: OutputLedger;
  try {
    errors = new OutputLedger(opts.errorsPath, { ...opts.ledger, truncate: true });
  } catch (error) {
    output.close();
    throw error;
  }
  try {
    const known = new Set(opts.requests.map((r) => r.custom_id));
    const alreadyDone = [...output.written].filter((id) => known.has(id)).length;
    opts.resumed?.(alreadyDone, output.droppedBytes);
    const pending = opts.requests.filter((r) => !output.written.has(r.custom_id));
    const summary = await runBatch(pending, {
      send: opts.send,
      limit: opts.limit,
      output,
      errors,
      maxAttempts: opts.maxAttempts,
      signal: opts.signal,
      observe: opts.observe,
      backoff: opts.backoff,
    });
    return { ...summary, total: opts.requests.length, alreadyDone };
  } finally {
    output.close();
    errors.close();
  }
}
