/**
 * The Batch API's jobs: each runs its input file through fleetgate's own URL with the engine of
 * `fleetgate batch`, in the `batch` priority class (one run: job-run.ts). This file is what is
 * around the runs: the API's create, cancel, get and list, and the scheduling. State is in the
 * store (batch-store.ts): a replica runs a job while it holds the job's lease, renewing it every
 * third of `leaseMs`; a job whose runner stopped or died (or lost its lease) is claimed again (by
 * any replica) and continues, skipping what its answers already hold.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Tracing } from '../tracing/tracing.js';
import { BATCH_URLS } from './batch-input.js';
import type { RunnerEvent } from './batch-runner.js';
import {
  type BatchObject,
  type BatchPage,
  type BatchStatus,
  type BatchStore,
  type LeaseState,
  newStoredBatch,
  type StoredBatch,
  StoreUnavailableError,
} from './batch-store.js';
import { type JobEngine, JobRun } from './job-run.js';

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

/** Counts for `fleetgate_batch_requests_total{status}`: each request's outcome, as its runner saw it. */
export type BatchRequestCounts = Record<RunnerEvent['type'], number>;

const DEFAULT_LEASE_MS = 15_000;

/** A job this process runs: the run, and its end (the lease released). */
interface Running {
  run: JobRun;
  done: Promise<void>;
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
    for (const { run } of this.#running.values()) run.stop();
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
    if (running) running.run.cancel();
    else this.#poke();
    return stored.batch;
  }

  #launch(stored: StoredBatch): void {
    const run = new JobRun(stored, {
      store: this.#opts.store,
      engine: this.#engine as JobEngine,
      owner: this.owner,
      maxFileSize: this.#opts.maxFileSize,
      maxAttempts: this.#opts.maxAttempts ?? 3,
      tracing: this.#opts.tracing ?? null,
      seconds: () => this.#seconds(),
      observe: (event) => {
        this.counts[event.type]++;
      },
      stopping: () => this.#stopped,
      saved: () => this.#recount(),
      onError: this.#opts.onError,
    });
    const id = stored.batch.id;
    const renewer = setInterval(() => void this.#renew(id, run), Math.ceil(this.#leaseMs / 3));
    renewer.unref();
    const done = run.run().finally(async () => {
      clearInterval(renewer);
      this.#running.delete(id);
      await this.#opts.store.release(id, this.owner).catch(() => {});
      this.#poke();
    });
    this.#running.set(id, { run, done });
  }

  /** Keeps the lease; a cancel seen in the store stops the run as cancelled, a lost lease as it is. */
  async #renew(id: string, run: JobRun): Promise<void> {
    let state: LeaseState;
    try {
      state = await this.#opts.store.renew(id, this.owner, this.#leaseMs);
    } catch {
      return; // The store is down: the run is paused by its results; the lease is renewed once it is back.
    }
    if (state === 'cancelling') run.cancel();
    else if (state === 'lost') run.leaseLost();
  }

  async #recount(): Promise<void> {
    this.#byStatus = await this.#opts.store.countByStatus().catch(() => this.#byStatus);
  }
}
