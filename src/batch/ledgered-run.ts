/**
 * One run of a batch against its files, for `fleetgate batch` and the Batch API alike: reads the
 * output ledger as a stream and marks the input lines it answers (resuming: they are skipped), starts
 * the errors file afresh (a request that failed for good in an earlier run is tried again), sends
 * the rest as the input is read again, and closes both files synced. What it holds is one byte per
 * input line, the requests in flight and the read-ahead; the input's `custom_id` map only while the
 * ledger is read.
 */
import type { BatchUrl } from './batch-input.js';
import { type RunnerEvent, type RunnerSummary, runBatch } from './batch-runner.js';
import type { Send } from './batch-sender.js';
import { type CheckedInput, pendingRequests, type ScanProgress } from './input-file.js';
import { type LedgerOptions, OutputLedger, scanLedger } from './output-ledger.js';

export interface LedgeredRunOptions {
  /** Checked by `checkInputFile`; its `ids` are emptied once the output is read. */
  input: CheckedInput;
  /** The API's batch: every line's url (checked again as the input is read again). */
  endpoint?: BatchUrl | null;
  outputPath: string;
  errorsPath: string;
  send: Send;
  limit: () => number;
  maxAttempts: number;
  signal?: AbortSignal;
  /** While the output is read: bytes read, its size, answers found. */
  reading?: ScanProgress;
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

/** Marks each input line the ledger at `path` answers; how many there are, and the ledger's whole bytes. */
async function matchLedger(input: CheckedInput, path: string, reading?: ScanProgress) {
  const answered = new Uint8Array(input.lines + 1);
  let alreadyDone = 0;
  const scan = await scanLedger(
    path,
    (customId) => {
      const line = input.ids.lineOf(customId);
      if (line !== 0 && answered[line] === 0) {
        answered[line] = 1;
        alreadyDone++;
      }
    },
    reading,
  );
  input.ids.clear();
  return { answered, alreadyDone, scan };
}

export async function runLedgered(opts: LedgeredRunOptions): Promise<LedgeredRunResult> {
  const { answered, alreadyDone, scan } = await matchLedger(opts.input, opts.outputPath, opts.reading);
  const output = new OutputLedger(opts.outputPath, scan.wholeBytes, opts.ledger);
  let errors: OutputLedger;
  try {
    errors = new OutputLedger(opts.errorsPath, 0, opts.ledger);
  } catch (error) {
    output.close();
    throw error;
  }
  try {
    opts.resumed?.(alreadyDone, scan.droppedBytes);
    const pending = pendingRequests(opts.input, (line) => answered[line] === 1, opts.endpoint ?? null);
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
    const total = opts.input.requests;
    const abandoned = total - alreadyDone - summary.completed - summary.failed;
    return { ...summary, abandoned, total, alreadyDone };
  } finally {
    output.close();
    errors.close();
  }
}
