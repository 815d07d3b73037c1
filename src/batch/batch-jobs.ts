/**
 * The Batch API's jobs: each runs its input file through fleetgate's own URL with the engine of
 * `fleetgate batch` (ledgered-run.ts: the output file is the ledger), in the `batch` priority class,
 * and walks OpenAI's lifecycle: validating → in_progress → finalizing → completed, or failed (bad
 * input), or cancelling → cancelled. State is in the store (batch-store.ts): a replica runs a job
 * while it holds the job's lease, renewing it every third of `leaseMs`; a job whose runner stopped
 * or died is claimed again (by any replica) and continues, skipping what its answers already hold.
 * A store that cannot be reached pauses a run (the runner sends nothing new) until it is back.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Span } from '@opentelemetry/api';
import type { Tracing } from '../tracing/tracing.js';
import { ConcurrencyControl, type FleetView } from './auto-concurrency.js';
import { BATCH_URLS, BatchInputError, type BatchUrl } from './batch-input.js';
import type { RunnerEvent } from './batch-runner.js';
import type { Send } from './batch-sender.js';
import {
  type BatchObject,
  type BatchPage,
  type BatchStatus,
  type BatchStore,
  type JobResults,
  newStoredBatch,
  type StoredBatch,
  StoreUnavailableError,
} from './batch-store.js';
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
  /** A running job's lease, ms (`batch.lease`). */
  leaseMs?: number;
  /** How often jobs to run are looked for, ms; a third of the lease unless set. */
  pollMs?: number;
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

/** How often a running job's counts are saved. */
const SAVE_INTERVAL_MS = 1000;
/** How often a step that needs the store tries again while it cannot be reached. */
const STORE_RETRY_MS = 500;
const DEFAULT_LEASE_MS = 15_000;

interface Running {
  stop: AbortController;
  /** Set by a cancel: the run ends as `cancelled`; else (fleetgate stopping, lease lost) it stays resumable. */
  cancelled: boolean;
  done: Promise<void>;
  /** The job's span, while tracing is on. */
  span: Span | null;
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

export class BatchJobs {
  readonly counts: BatchRequestCounts = { completed: 0, failed: 0, retried: 0 };
  /** Who holds the leases this process takes. */
  readonly owner = `${hostname()}/${process.pid}/${randomBytes(4).toString('hex')}`;
  readonly #opts: BatchJobsOptions;
  readonly #leaseMs: number;
  readonly #running = new Map<string, Running>();
  #byStatus: Partial<Record<BatchStatus, number>> = {};
  #storeReachable = true;
  #engine: JobEngine | null = null;
  #stopped = false;
  #poller: NodeJS.Timeout | null = null;
  #claiming: Promise<void> | null = null;
  #claimAgain = false;

  constructor(opts: BatchJobsOptions) {
    this.#opts = opts;
    this.#leaseMs = opts.leaseMs ?? DEFAULT_LEASE_MS;
  }

  #seconds(): number {
    return Math.floor((this.#opts.now ?? Date.now)() / 1000);
  }

  /** Starts taking jobs: those waiting, and those whose runner stopped or died. */
  start(engine: JobEngine): void {
    this.#engine = engine;
    this.#poller = setInterval(() => this.#poke(), this.#opts.pollMs ?? Math.ceil(this.#leaseMs / 3));
    this.#poller.unref();
    this.#poke();
  }

  /** Stops every run, leaving each resumable (its state says it still runs), its lease released. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#poller !== null) clearInterval(this.#poller);
    await this.#claiming;
    for (const running of this.#running.values()) running.stop.abort();
    await Promise.all([...this.#running.values()].map((r) => r.done));
  }

  /** Looks for jobs to run now (and again after, if a look is under way). */
  #poke(): void {
    if (this.#stopped || this.#engine === null) return;
    if (this.#claiming !== null) {
      this.#claimAgain = true;
      return;
    }
    this.#claiming = this.#claimAll()
      .then(() => {
        this.#storeReachable = true;
      })
      .catch((error: unknown) => {
        if (error instanceof StoreUnavailableError) this.#storeReachable = false;
        else this.#opts.onError?.('', error);
      })
      .finally(() => {
        this.#claiming = null;
        if (this.#claimAgain) {
          this.#claimAgain = false;
          this.#poke();
        }
      });
  }

  async #claimAll(): Promise<void> {
    const { store } = this.#opts;
    this.#byStatus = await store.countByStatus();
    while (!this.#stopped) {
      const stored = await store.claim(this.owner, this.#leaseMs);
      if (stored === null) return;
      // Ours already (its lease ran out while the store was down): the claim renewed it.
      if (!this.#running.has(stored.batch.id)) this.#launch(stored);
    }
  }

  async get(id: string): Promise<BatchObject | null> {
    return (await this.#opts.store.batch(id))?.batch ?? null;
  }

  /** Newest first. */
  list(limit: number, after?: string): Promise<BatchPage> {
    return this.#opts.store.listBatches(limit, after);
  }

  /** As of the last poll (a third of the lease). */
  get storeReachable(): boolean {
    return this.#storeReachable;
  }

  /** As of the last look (each poll and each change this process made). */
  countByStatus(): Partial<Record<BatchStatus, number>> {
    return this.#byStatus;
  }

  /** Ids of the jobs this process runs now. */
  runningIds(): string[] {
    return [...this.#running.keys()];
  }

  async create(params: CreateParams): Promise<BatchObject> {
    const { input_file_id, endpoint, completion_window, metadata } = params;
    const { store } = this.#opts;
    if (typeof input_file_id !== 'string') throw new BatchRequestError(400, 'input_file_id is required');
    const file = await store.file(input_file_id);
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
    const metadataOrNull = (metadata as Record<string, string> | null | undefined) ?? null;
    const stored = newStoredBatch({ endpoint, input_file_id, metadata: metadataOrNull }, this.#seconds());
    await store.insertBatch(stored);
    this.#poke();
    return stored.batch;
  }

  /** Marks the job cancelling in the store; its runner (here, or on another replica at its next renewal) stops it. */
  async cancel(id: string): Promise<BatchObject> {
    const stored = await this.#opts.store.requestCancel(id, this.#seconds());
    if (stored === null) throw new BatchRequestError(404, `No batch found with id '${id}'`);
    const { status } = stored.batch;
    if (status !== 'cancelling' && status !== 'cancelled')
      throw new BatchRequestError(409, `batch ${id} is ${status}: it cannot be cancelled`);
    const running = this.#running.get(id);
    if (running) {
      running.cancelled = true;
      running.stop.abort();
    } else this.#poke();
    return stored.batch;
  }

  #launch(stored: StoredBatch): void {
    const stop = new AbortController();
    const tracing = this.#opts.tracing ?? null;
    const span = tracing === null ? null : startJobSpan(tracing, stored.batch);
    const running: Running = { stop, cancelled: false, done: Promise.resolve(), span };
    const id = stored.batch.id;
    this.#running.set(id, running);
    const renewer = setInterval(() => void this.#renew(id, running), Math.ceil(this.#leaseMs / 3));
    renewer.unref();
    running.done = this.#run(stored, running)
      .catch((error: unknown) => {
        // Stopped, or the store went away mid-step: left resumable, claimed again once it is back.
        if ((running.stop.signal.aborted && !running.cancelled) || error instanceof StoreUnavailableError) return;
        this.#opts.onError?.(id, error);
        return this.#fail(stored, 'internal_error', `the job stopped: ${(error as Error).message}`, null);
      })
      .catch(() => {})
      .finally(async () => {
        clearInterval(renewer);
        this.#running.delete(id);
        if (span !== null) endJobSpan(span, stored.batch);
        await this.#opts.store.release(id, this.owner).catch(() => {});
        this.#poke();
      });
  }

  /** Keeps the lease; a cancel seen in the store stops the run as cancelled, a lost lease as it is. */
  async #renew(id: string, running: Running): Promise<void> {
    let state: Awaited<ReturnType<BatchStore['renew']>>;
    try {
      state = await this.#opts.store.renew(id, this.owner, this.#leaseMs);
    } catch {
      return; // The store is down: the run is paused by its results; the lease is renewed once it is back.
    }
    if (state === 'held') return;
    running.cancelled = state === 'cancelling';
    running.stop.abort();
  }

  /** Runs `step` until the store takes it (it may be down for a while), unless the run is stopped meanwhile. */
  async #persist<T>(step: () => Promise<T>, running: Running | null = null): Promise<T> {
    for (;;) {
      try {
        return await step();
      } catch (error) {
        if (
          !(error instanceof StoreUnavailableError) ||
          this.#stopped ||
          (running?.stop.signal.aborted && !running.cancelled)
        )
          throw error;
        await pause(STORE_RETRY_MS);
      }
    }
  }

  async #save(stored: StoredBatch): Promise<void> {
    await this.#persist(() => this.#opts.store.saveBatch(stored));
    this.#byStatus = await this.#opts.store.countByStatus().catch(() => this.#byStatus);
  }

  async #run(stored: StoredBatch, running: Running): Promise<void> {
    const { batch } = stored;
    const { store } = this.#opts;
    const engine = this.#engine as JobEngine;
    if (batch.status === 'cancelling') {
      running.cancelled = true;
      return this.#settleStopped(stored, running);
    }
    const endpoint = batch.endpoint as BatchUrl;
    const local = await this.#persist(() => store.openInput(batch.input_file_id), running);
    try {
      let input: CheckedInput;
      try {
        input = await checkInputFile(local.path, { endpoint, maxBytes: this.#opts.maxFileSize });
      } catch (error) {
        if (!(error instanceof BatchInputError)) throw error;
        return await this.#fail(stored, 'invalid_request', error.problem, error.line);
      }
      if (running.stop.signal.aborted) return await this.#settleStopped(stored, running);
      batch.status = 'in_progress';
      batch.in_progress_at ??= this.#seconds();
      batch.request_counts = { total: input.requests, completed: 0, failed: 0 };
      await this.#save(stored);
      await this.#runRequests(stored, running, input, engine);
    } finally {
      await local.close();
    }
    if (running.stop.signal.aborted) return this.#settleStopped(stored, running);
    batch.status = 'finalizing';
    batch.finalizing_at = this.#seconds();
    await this.#save(stored);
    await this.#describeOutputs(stored);
    await this.#finish(stored, 'completed');
  }

  async #runRequests(stored: StoredBatch, running: Running, input: CheckedInput, engine: JobEngine): Promise<void> {
    const { batch } = stored;
    const { store } = this.#opts;
    const results = await this.#persist(() => store.openResults(stored, running.stop.signal), running);
    const control = new ConcurrencyControl({ fixed: null, fetchStatus: engine.fetchStatus });
    await control.start();
    const saver = setInterval(() => void this.#saveProgress(stored, results), SAVE_INTERVAL_MS);
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
        endpoint: batch.endpoint as BatchUrl,
        results,
        send:
          running.span === null ? engine.send : tracedSend(this.#opts.tracing as Tracing, running.span, engine.send),
        limit: control.limit,
        maxAttempts: this.#opts.maxAttempts ?? 3,
        signal: running.stop.signal,
        resumed: (done) => {
          batch.request_counts.completed = done;
        },
        observe,
      });
      await this.#countFromStore(stored, results);
    } finally {
      clearInterval(saver);
      control.stop();
    }
  }

  /** The counts as stored, where the store keeps them (answers written by any replica). */
  async #countFromStore(stored: StoredBatch, results: JobResults): Promise<void> {
    const counts = await this.#persist(() => results.counts());
    if (counts !== null) Object.assign(stored.batch.request_counts, counts);
  }

  async #saveProgress(stored: StoredBatch, results: JobResults): Promise<void> {
    try {
      const counts = await results.counts();
      if (counts !== null) Object.assign(stored.batch.request_counts, counts);
      await this.#opts.store.saveBatch(stored);
    } catch {
      // Saved at the next interval, or when the run ends.
    }
  }

  /** Output and error files become files of the API (OpenAI names them only when they hold lines). */
  async #describeOutputs(stored: StoredBatch): Promise<void> {
    const { batch } = stored;
    const now = this.#seconds();
    const { store } = this.#opts;
    if (batch.request_counts.completed > 0) {
      await this.#persist(() => store.describeResults(stored, 'output', now));
      batch.output_file_id = stored.outputId;
    }
    if (batch.request_counts.failed > 0) {
      await this.#persist(() => store.describeResults(stored, 'error', now));
      batch.error_file_id = stored.errorsId;
    }
  }

  /** Cancelled: what was written stays downloadable. Stopped with fleetgate or lease lost: left as is, to resume. */
  async #settleStopped(stored: StoredBatch, running: Running): Promise<void> {
    if (!running.cancelled) return;
    const results = await this.#persist(() => this.#opts.store.openResults(stored));
    await this.#countFromStore(stored, results);
    await results.close();
    stored.batch.cancelling_at ??= this.#seconds();
    await this.#describeOutputs(stored);
    await this.#finish(stored, 'cancelled');
  }

  async #finish(stored: StoredBatch, status: 'completed' | 'cancelled'): Promise<void> {
    const now = this.#seconds();
    stored.batch.status = status;
    if (status === 'completed') stored.batch.completed_at = now;
    else stored.batch.cancelled_at = now;
    await this.#save(stored);
  }

  async #fail(stored: StoredBatch, code: string, message: string, line: number | null): Promise<void> {
    stored.batch.status = 'failed';
    stored.batch.failed_at = this.#seconds();
    stored.batch.errors = { object: 'list', data: [{ code, message, line, param: null }] };
    await this.#save(stored);
  }
}
