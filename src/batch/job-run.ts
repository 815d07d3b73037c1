/**
 * One job's run, on the replica that holds its lease: it walks OpenAI's lifecycle, validating →
 * in_progress → finalizing → completed, or failed (bad input), or cancelling → cancelled, running
 * its input file through fleetgate's own URL with the engine of `fleetgate batch` (ledgered-run.ts:
 * what its answers hold is skipped, so a run taken over continues). Every save carries the lease
 * owner; a save refused as `lease-lost` (the lease passed, and maybe another replica runs the job
 * now) stops the run where it is, writing nothing more. A store that cannot be reached pauses a step
 * until it is back. The scheduling around runs (claims, renewals, the API) is batch-jobs.ts's.
 */
import type { Span } from '@opentelemetry/api';
import type { Tracing } from '../tracing/tracing.js';
import { ConcurrencyControl, type FleetView } from './auto-concurrency.js';
import { BatchInputError, type BatchUrl } from './batch-input.js';
import type { RunnerEvent } from './batch-runner.js';
import type { Send } from './batch-sender.js';
import { type BatchStore, type JobResults, type StoredBatch, StoreUnavailableError } from './batch-store.js';
import { endJobSpan, startJobSpan, tracedSend } from './batch-trace.js';
import { type CheckedInput, checkInputFile } from './input-file.js';
import { runLedgered } from './ledgered-run.js';

/** What a job sends through, set once fleetgate listens. */
export interface JobEngine {
  send: Send;
  fetchStatus: () => Promise<FleetView>;
}

/** What a run is given by the jobs that launch it. */
export interface JobRunContext {
  store: BatchStore;
  engine: JobEngine;
  /** The lease holder: every save is made in its name. */
  owner: string;
  maxFileSize: number;
  maxAttempts: number;
  /** A span per job and per request sent; null: none. */
  tracing: Tracing | null;
  /** The clock, unix seconds. */
  seconds(): number;
  /** Told of each request's outcome (completed, failed for good, retried). */
  observe(event: RunnerEvent): void;
  /** True once the jobs stop (fleetgate closing): a step waiting for the store gives up. */
  stopping(): boolean;
  /** Told after each save: the counts by status may have changed. */
  saved(): Promise<void>;
  /** Told about a crash of the run (the job is then saved as failed). */
  onError?: (batchId: string, error: unknown) => void;
}

/** How often a running job's counts are saved. */
const SAVE_INTERVAL_MS = 1000;
/** How often a step that needs the store tries again while it cannot be reached. */
const STORE_RETRY_MS = 500;

/** A save refused as `lease-lost`: unwinds the run, which is left as it is for the lease's new holder. */
class LeaseLostError extends Error {}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

export class JobRun {
  readonly #stop = new AbortController();
  /** Set by a cancel: the run ends as `cancelled`; else (fleetgate stopping, lease lost) it stays resumable. */
  #cancelled = false;
  readonly #span: Span | null;

  constructor(
    readonly stored: StoredBatch,
    readonly context: JobRunContext,
  ) {
    this.#span = context.tracing === null ? null : startJobSpan(context.tracing, stored.batch);
  }

  /** A cancel (here, or seen at a renewal): the run stops and ends as `cancelled`. */
  cancel(): void {
    this.#cancelled = true;
    this.#stop.abort();
  }

  /** Fleetgate stops: the run stops, resumable. */
  stop(): void {
    this.#stop.abort();
  }

  /** The lease is gone (a renewal or a save found it): the run stops and writes nothing more. */
  leaseLost(): void {
    this.#cancelled = false;
    this.#stop.abort();
  }

  /** The whole run; never rejects (a crash is reported and saved as the job's failure). */
  async run(): Promise<void> {
    const { stored, context } = this;
    try {
      await this.#walk();
    } catch (error) {
      // Stopped, lease lost, or the store went away mid-step: left resumable, claimed again later.
      const resumable = this.#stop.signal.aborted && !this.#cancelled;
      if (!resumable && !(error instanceof StoreUnavailableError) && !(error instanceof LeaseLostError)) {
        context.onError?.(stored.batch.id, error);
        await this.#fail('internal_error', `the job stopped: ${(error as Error).message}`, null).catch(() => {});
      }
    } finally {
      if (this.#span !== null) endJobSpan(this.#span, stored.batch);
    }
  }

  /** Runs `step` until the store takes it (it may be down for a while), unless the run is stopped meanwhile. */
  async #persist<T>(step: () => Promise<T>): Promise<T> {
    for (;;) {
      try {
        return await step();
      } catch (error) {
        const stopped = this.context.stopping() || (this.#stop.signal.aborted && !this.#cancelled);
        if (!(error instanceof StoreUnavailableError) || stopped) throw error;
        await pause(STORE_RETRY_MS);
      }
    }
  }

  /** Saves the job in the lease's name; a lost lease stops the run here. */
  async #save(): Promise<void> {
    const { store, owner } = this.context;
    const outcome = await this.#persist(() => store.saveBatch(this.stored, owner));
    if (outcome === 'lease-lost') {
      this.leaseLost();
      throw new LeaseLostError(`the lease of ${this.stored.batch.id} passed: another replica may run it`);
    }
    await this.context.saved();
  }

  async #walk(): Promise<void> {
    const { batch } = this.stored;
    const { store } = this.context;
    if (batch.status === 'cancelling') {
      this.#cancelled = true;
      return this.#settleStopped();
    }
    const local = await this.#persist(() => store.openInput(batch.input_file_id));
    try {
      let input: CheckedInput;
      try {
        const endpoint = batch.endpoint as BatchUrl;
        input = await checkInputFile(local.path, { endpoint, maxBytes: this.context.maxFileSize });
      } catch (error) {
        if (!(error instanceof BatchInputError)) throw error;
        return await this.#fail('invalid_request', error.problem, error.line);
      }
      if (this.#stop.signal.aborted) return await this.#settleStopped();
      batch.status = 'in_progress';
      batch.in_progress_at ??= this.context.seconds();
      batch.request_counts = { total: input.requests, completed: 0, failed: 0 };
      await this.#save();
      await this.#runRequests(input);
    } finally {
      await local.close();
    }
    if (this.#stop.signal.aborted) return this.#settleStopped();
    batch.status = 'finalizing';
    batch.finalizing_at = this.context.seconds();
    await this.#save();
    await this.#describeOutputs();
    await this.#finish('completed');
  }

  async #runRequests(input: CheckedInput): Promise<void> {
    const { batch } = this.stored;
    const { store, engine, tracing } = this.context;
    const results = await this.#persist(() => store.openResults(this.stored, this.#stop.signal));
    const control = new ConcurrencyControl({ fixed: null, fetchStatus: engine.fetchStatus });
    await control.start();
    const saver = setInterval(() => void this.#saveProgress(results), SAVE_INTERVAL_MS);
    saver.unref();
    const observe = (event: RunnerEvent) => {
      if (event.type !== 'retried') batch.request_counts[event.type]++;
      this.context.observe(event);
    };
    try {
      await runLedgered({
        input,
        endpoint: batch.endpoint as BatchUrl,
        results,
        send: this.#span === null ? engine.send : tracedSend(tracing as Tracing, this.#span, engine.send),
        limit: control.limit,
        maxAttempts: this.context.maxAttempts,
        signal: this.#stop.signal,
        resumed: (done) => {
          batch.request_counts.completed = done;
        },
        observe,
      });
      await this.#countFromStore(results);
    } finally {
      clearInterval(saver);
      control.stop();
    }
  }

  /** The counts as stored, where the store keeps them (answers written by any replica). */
  async #countFromStore(results: JobResults): Promise<void> {
    const counts = await this.#persist(() => results.counts());
    if (counts !== null) Object.assign(this.stored.batch.request_counts, counts);
  }

  /** Between saves of the walk: the counts so far. A lost lease stops the run (its requests end). */
  async #saveProgress(results: JobResults): Promise<void> {
    try {
      const counts = await results.counts();
      if (counts !== null) Object.assign(this.stored.batch.request_counts, counts);
      if ((await this.context.store.saveBatch(this.stored, this.context.owner)) === 'lease-lost') this.leaseLost();
    } catch {
      // Saved at the next interval, or when the run ends.
    }
  }

  /** Output and error files become files of the API (OpenAI names them only when they hold lines). */
  async #describeOutputs(): Promise<void> {
    const { stored } = this;
    const { batch } = stored;
    const now = this.context.seconds();
    const { store } = this.context;
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
  async #settleStopped(): Promise<void> {
    if (!this.#cancelled) return;
    const results = await this.#persist(() => this.context.store.openResults(this.stored));
    await this.#countFromStore(results);
    await results.close();
    this.stored.batch.cancelling_at ??= this.context.seconds();
    await this.#describeOutputs();
    await this.#finish('cancelled');
  }

  async #finish(status: 'completed' | 'cancelled'): Promise<void> {
    const { batch } = this.stored;
    const now = this.context.seconds();
    batch.status = status;
    if (status === 'completed') batch.completed_at = now;
    else batch.cancelled_at = now;
    await this.#save();
  }

  async #fail(code: string, message: string, line: number | null): Promise<void> {
    const { batch } = this.stored;
    batch.status = 'failed';
    batch.failed_at = this.context.seconds();
    batch.errors = { object: 'list', data: [{ code, message, line, param: null }] };
    await this.#save();
  }
}
