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
import type { JobResults } from './batch-store.js';
import { type CheckedInput, pendingRequests, type ScanProgress } from './input-file.js';
import { type LedgerOptions, OutputLedger, scanLedger } from './output-ledger.js';

/** Answers in two JSONL files: the output (the ledger: what it holds is done) and the errors. */
export class FileResults implements JobResults {
  readonly unsaved = 0;
  /** Bytes of a torn last line of the output, cut off once scanned. */
  droppedBytes = 0;
  #output: OutputLedger | null = null;
  #errors: OutputLedger | null = null;

  constructor(
    readonly outputPath: string,
    readonly errorsPath: string,
    readonly options: { ledger?: LedgerOptions; reading?: ScanProgress } = {},
  ) {}

  /** Reads the output, then opens both files to append (the errors file afresh). */
  async scanAnswered(onAnswered: (customId: string) => void): Promise<void> {
    const scan = await scanLedger(this.outputPath, onAnswered, this.options.reading);
    this.droppedBytes = scan.droppedBytes;
    this.#output = new OutputLedger(this.outputPath, scan.wholeBytes, this.options.ledger);
    try {
      this.#errors = new OutputLedger(this.errorsPath, 0, this.options.ledger);
    } catch (error) {
      this.#output.close();
      throw error;
    }
  }

  get output(): OutputLedger {
    if (this.#output === null) throw new Error(`${this.outputPath} is not open: scanAnswered first`);
    return this.#output;
  }

  get errors(): OutputLedger {
    if (this.#errors === null) throw new Error(`${this.errorsPath} is not open: scanAnswered first`);
    return this.#errors;
  }

  async counts(): Promise<null> {
    return null;
  }

  async close(): Promise<void> {
    this.#output?.close();
    this.#errors?.close();
  }
}

interface FileTargets {
  outputPath: string;
  errorsPath: string;
  /** While the output is read: bytes read, its size, answers found. */
  reading?: ScanProgress;
  ledger?: LedgerOptions;
}

export type LedgeredRunOptions = RunOptions & (FileTargets | { results: JobResults });

interface RunOptions {
  /** Checked by `checkInputFile`; its `ids` are emptied once the output is read. */
  input: CheckedInput;
  /** The API's batch: every line's url (checked again as the input is read again). */
  endpoint?: BatchUrl | null;
  send: Send;
  limit: () => number;
  maxAttempts: number;
  signal?: AbortSignal;
  /** Called once the ledger is read: how many are already written. */
  resumed?: (alreadyDone: number, droppedBytes: number) => void;
  observe?: (event: RunnerEvent) => void;
  backoff?: (failures: number) => number;
}

export interface LedgeredRunResult extends RunnerSummary {
  total: number;
  /** Written by earlier runs. */
  alreadyDone: number;
}

/** Marks each input line the stored answers answer; how many there are. */
async function matchAnswers(input: CheckedInput, results: JobResults) {
  const answered = new Uint8Array(input.lines + 1);
  let alreadyDone = 0;
  await results.scanAnswered((customId) => {
    const line = input.ids.lineOf(customId);
    if (line !== 0 && answered[line] === 0) {
      answered[line] = 1;
      alreadyDone++;
    }
  });
  input.ids.clear();
  return { answered, alreadyDone };
}

export async function runLedgered(opts: LedgeredRunOptions): Promise<LedgeredRunResult> {
  const results = 'results' in opts ? opts.results : new FileResults(opts.outputPath, opts.errorsPath, opts);
  try {
    const { answered, alreadyDone } = await matchAnswers(opts.input, results);
    opts.resumed?.(alreadyDone, results instanceof FileResults ? results.droppedBytes : 0);
    const pending = pendingRequests(opts.input, (line) => answered[line] === 1, opts.endpoint ?? null);
    const summary = await runBatch(pending, {
      send: opts.send,
      // Answers not yet stored, a limit's worth, pause new sends: a kill loses at most twice the limit.
      limit: () => (results.unsaved >= opts.limit() ? 0 : opts.limit()),
      output: results.output,
      errors: results.errors,
      maxAttempts: opts.maxAttempts,
      signal: opts.signal,
      observe: opts.observe,
      backoff: opts.backoff,
    });
    const total = opts.input.requests;
    const abandoned = total - alreadyDone - summary.completed - summary.failed;
    return { ...summary, abandoned, total, alreadyDone };
  } finally {
    await results.close();
  }
}
