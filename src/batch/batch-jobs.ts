/**
 * The Batch API's jobs: each runs its input file through fleetgate's own URL with the engine of
 * `fleetgate batch` (ledgered-run.ts: the output file is the ledger), in the `batch` priority class,
 * and walks OpenAI's lifecycle: validating → in_progress → finalizing → completed, or failed (bad
 * input), or cancelling → cancelled. State is saved in `batch.dir`; a job that was running when
 * fleetgate stopped runs again when it starts, skipping what its output file already holds.
 */
import type { Tracing } from '../tracing/tracing.js';
import { ConcurrencyControl, type FleetView } from './auto-concurrency.js';
import { BATCH_URLS, BatchInputError, type BatchUrl } from './batch-input.js';
import type { RunnerEvent } from './batch-runner.js';
import type { Send } from './batch-sender.js';
import { type BatchObject, type BatchStatus, type BatchStore, newId, type StoredBatch } from './batch-store.js';
import { endJobSpan, startJobSpan, tracedSend } from './batch-trace.js';
import { type CheckedInput, checkInputFile } from './input-file.js';
import { runLedgered } from './ledgered-run.js';

/** What a job sends through, set once fleetgate listens. */
export interface JobEngine {
  send: Send;
  fetchStatus: () => Promise<FleetView>;
}

export interface BatchJobsOptions {
  store: BatchStore;
  maxFileSize: number;
  maxAttempts?: number;
  now?: () => number;
  /** Told about problems a job hit (a crash of its run). */
  onError?: (batchId: string, error: unknown) => void;
  /** A span per job and per request sent (`tracing`); null or absent: none. */
  tracing?: Tracing | null;
}

/** A refusal of a create or cancel call, for a 4xx answer. */
export class BatchRequestError extends Error {
  constructor(
    readonly status: 400 | 404 | 409,
    message: string,
  ) {
    super(message);
  }
}

export interface CreateParams {
  input_file_id?: unknown;
  endpoint?: unknown;
  completion_window?: unknown;
  metadata?: unknown;
}

/** Counts for `fleetgate_batch_requests_total{status}`. */
export interface BatchRequestCounts {
  completed: number;
  failed: number;
  retried: number;
}

const ACTIVE: ReadonlySet<BatchStatus> = new Set(['validating', 'in_progress', 'finalizing', 'cancelling']);
/** How often a running job's counts are saved. */
const SAVE_INTERVAL_MS = 1000;

interface Running {
  stop: AbortController;
  /** Set by cancel(): the run ends as `cancelled`; else (fleetgate stopping) it stays resumable. */
  cancelled: boolean;
  done: Promise<void>;
}

export class BatchJobs {
  readonly counts: BatchRequestCounts = { completed: 0, failed: 0, retried: 0 };
  readonly #opts: BatchJobsOptions;
  readonly #jobs = new Map<string, StoredBatch>();
  readonly #running = new Map<string, Running>();
  #engine: JobEngine | null = null;
  #stopped = false;

  constructor(opts: BatchJobsOptions) {
    this.#opts = opts;
    for (const stored of opts.store.loadBatches()) this.#jobs.set(stored.batch.id, stored);
  }

  #seconds(): number {
    return Math.floor((this.#opts.now ?? Date.now)() / 1000);
  }

  /** Starts taking jobs, and runs again those that were running when fleetgate stopped. */
  start(engine: JobEngine): void {
    this.#engine = engine;
    for (const stored of this.#jobs.values()) {
      if (stored.batch.status === 'cancelling') this.#finish(stored, 'cancelled');
      else if (ACTIVE.has(stored.batch.status)) this.#launch(stored);
    }
  }

  /** Stops every run, leaving each resumable (its state says it still runs). */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const running of this.#running.values()) running.stop.abort();
    await Promise.all([...this.#running.values()].map((r) => r.done));
  }

  get(id: string): BatchObject | null {
    return this.#jobs.get(id)?.batch ?? null;
  }

  /** Newest first. */
  list(): BatchObject[] {
    return [...this.#jobs.values()]
      .map((s) => s.batch)
      .sort((a, b) => b.created_at - a.created_at || (a.id < b.id ? 1 : -1));
  }

  countByStatus(): Record<BatchStatus, number> {
    const counts = {} as Record<BatchStatus, number>;
    for (const { batch } of this.#jobs.values()) counts[batch.status] = (counts[batch.status] ?? 0) + 1;
    return counts;
  }

  create(params: CreateParams): BatchObject {
    const { input_file_id, endpoint, completion_window, metadata } = params;
    if (typeof input_file_id !== 'string') throw new BatchRequestError(400, 'input_file_id is required');
    const file = this.#opts.store.file(input_file_id);
    if (file === null) throw new BatchRequestError(404, `No file found with id '${input_file_id}'`);
    if (file.purpose !== 'batch')
      throw new BatchRequestError(400, `file ${input_file_id} has purpose '${file.purpose}', not 'batch'`);
    if (typeof endpoint !== 'string' || !(BATCH_URLS as readonly string[]).includes(endpoint))
      throw new BatchRequestError(400, `endpoint must be one of ${BATCH_URLS.join(', ')}`);
    if (completion_window !== '24h') throw new BatchRequestError(400, "completion_window must be '24h'");
    if (metadata !== undefined && metadata !== null && (typeof metadata !== 'object' || Array.isArray(metadata)))
      throw new BatchRequestError(400, 'metadata must be an object of strings');
    if (this.#engine === null || this.#stopped)
      throw new BatchRequestError(409, 'fleetgate is not taking batch jobs now');
    const now = this.#seconds();
    const stored: StoredBatch = {
      batch: {
        id: newId('batch_'),
        object: 'batch',
        endpoint,
        errors: null,
        input_file_id,
        completion_window,
        status: 'validating',
        output_file_id: null,
        error_file_id: null,
        created_at: now,
        in_progress_at: null,
        expires_at: now + 24 * 3600,
        finalizing_at: null,
        completed_at: null,
        failed_at: null,
        expired_at: null,
        cancelling_at: null,
        cancelled_at: null,
        request_counts: { total: 0, completed: 0, failed: 0 },
        metadata: (metadata as Record<string, string> | null | undefined) ?? null,
      },
      outputId: newId('file-'),
      errorsId: newId('file-'),
    };
    this.#jobs.set(stored.batch.id, stored);
    this.#opts.store.saveBatch(stored);
    this.#launch(stored);
    return stored.batch;
  }

  cancel(id: string): BatchObject {
    const stored = this.#jobs.get(id);
    if (stored === undefined) throw new BatchRequestError(404, `No batch found with id '${id}'`);
    const { batch } = stored;
    if (batch.status === 'validating' || batch.status === 'in_progress') {
      batch.status = 'cancelling';
      batch.cancelling_at = this.#seconds();
      this.#opts.store.saveBatch(stored);
      const running = this.#running.get(id);
      if (running) {
        running.cancelled = true;
        running.stop.abort();
      } else this.#finish(stored, 'cancelled');
    } else if (batch.status !== 'cancelling' && batch.status !== 'cancelled') {
      throw new BatchRequestError(409, `batch ${id} is ${batch.status}: it cannot be cancelled`);
    }
    return batch;
  }

  #launch(stored: StoredBatch): void {
    const stop = new AbortController();
    const running: Running = { stop, cancelled: false, done: Promise.resolve() };
    this.#running.set(stored.batch.id, running);
    const tracing = this.#opts.tracing ?? null;
    const span = tracing === null ? null : startJobSpan(tracing, stored.batch);
    running.done = this.#run(stored, running, span === null ? null : { tracing: tracing as Tracing, span })
      .catch((error: unknown) => {
        this.#opts.onError?.(stored.batch.id, error);
        this.#fail(stored, 'internal_error', `the job stopped: ${(error as Error).message}`, null);
      })
      .finally(() => {
        this.#running.delete(stored.batch.id);
        if (span !== null) endJobSpan(span, stored.batch);
      });
  }

  async #run(
    stored: StoredBatch,
    running: Running,
    traced: { tracing: Tracing; span: Parameters<typeof tracedSend>[1] } | null,
  ): Promise<void> {
    const { batch } = stored;
    const { store } = this.#opts;
    const engine = this.#engine as JobEngine;
    const inputPath = store.contentPath(batch.input_file_id) as string;
    const endpoint = batch.endpoint as BatchUrl;
    let input: CheckedInput;
    try {
      input = await checkInputFile(inputPath, { endpoint, maxBytes: this.#opts.maxFileSize });
    } catch (error) {
      if (!(error instanceof BatchInputError)) throw error;
      this.#fail(stored, 'invalid_request', error.problem, error.line);
      return;
    }
    if (running.stop.signal.aborted) return this.#settleStopped(stored, running);
    batch.status = 'in_progress';
    batch.in_progress_at ??= this.#seconds();
    batch.request_counts = { total: input.requests, completed: 0, failed: 0 };
    store.saveBatch(stored);

    const control = new ConcurrencyControl({ fixed: null, fetchStatus: engine.fetchStatus });
    await control.start();
    const saver = setInterval(() => store.saveBatch(stored), SAVE_INTERVAL_MS);
    saver.unref();
    const observe = (event: RunnerEvent) => {
      if (event.type === 'completed') {
        batch.request_counts.completed++;
        this.counts.completed++;
      } else if (event.type === 'failed') {
        batch.request_counts.failed++;
        this.counts.failed++;
      } else this.counts.retried++;
    };
    try {
      await runLedgered({
        input,
        endpoint,
        outputPath: store.contentPath(stored.outputId) as string,
        errorsPath: store.contentPath(stored.errorsId) as string,
        send: traced === null ? engine.send : tracedSend(traced.tracing, traced.span, engine.send),
        limit: control.limit,
        maxAttempts: this.#opts.maxAttempts ?? 3,
        signal: running.stop.signal,
        resumed: (done) => {
          batch.request_counts.completed = done;
        },
        observe,
      });
    } finally {
      clearInterval(saver);
      control.stop();
    }
    if (running.stop.signal.aborted) return this.#settleStopped(stored, running);
    batch.status = 'finalizing';
    batch.finalizing_at = this.#seconds();
    store.saveBatch(stored);
    this.#describeOutputs(stored);
    this.#finish(stored, 'completed');
  }

  /** Output and error files become files of the API (OpenAI names them only when they hold lines). */
  #describeOutputs(stored: StoredBatch): void {
    const { batch } = stored;
    const now = this.#seconds();
    const { store } = this.#opts;
    if (batch.request_counts.completed > 0) {
      store.describeFile(stored.outputId, `${batch.id}_output.jsonl`, 'batch_output', now);
      batch.output_file_id = stored.outputId;
    }
    if (batch.request_counts.failed > 0) {
      store.describeFile(stored.errorsId, `${batch.id}_error.jsonl`, 'batch_output', now);
      batch.error_file_id = stored.errorsId;
    }
  }

  /** Cancelled: what was written stays downloadable. Stopped with fleetgate: left as is, to resume. */
  #settleStopped(stored: StoredBatch, running: Running): void {
    if (!running.cancelled) {
      this.#opts.store.saveBatch(stored);
      return;
    }
    this.#describeOutputs(stored);
    this.#finish(stored, 'cancelled');
  }

  #finish(stored: StoredBatch, status: 'completed' | 'cancelled'): void {
    const now = this.#seconds();
    stored.batch.status = status;
    if (status === 'completed') stored.batch.completed_at = now;
    else stored.batch.cancelled_at = now;
    this.#opts.store.saveBatch(stored);
  }

  #fail(stored: StoredBatch, code: string, message: string, line: number | null): void {
    stored.batch.status = 'failed';
    stored.batch.failed_at = this.#seconds();
    stored.batch.errors = { object: 'list', data: [{ code, message, line, param: null }] };
    this.#opts.store.saveBatch(stored);
  }
}
