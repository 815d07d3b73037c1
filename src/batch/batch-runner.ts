/**
 * The batch engine shared by `fleetgate batch` and the Batch API's jobs: keeps `limit()` requests
 * in flight, writes each answer to the output ledger as it comes, retries what may pass elsewhere
 * (up to `maxAttempts`, with exponential backoff), writes a 4xx or a request out of attempts to
 * the errors ledger, and stops taking new work when `signal` aborts (in-flight ones are abandoned:
 * they are not in the ledger, so a re-run sends them again).
 *
 * A request fleetgate never sent anywhere (it was down, or had no backend ready) costs no attempt;
 * such waits are bounded too (`maxNotSent`), so a fleet gone for good ends the run.
 */
import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import type { BatchRequest } from './batch-input.js';
import type { Send, SendOutcome } from './batch-sender.js';
import type { BatchOutputRecord } from './output-ledger.js';

export interface LedgerSink {
  append(record: BatchOutputRecord): void;
}

export interface RunnerOptions {
  send: Send;
  /** How many requests may be in flight now (0 pauses); read before each start. */
  limit: () => number;
  output: LedgerSink;
  errors: LedgerSink;
  maxAttempts: number;
  /** Retries of a request fleetgate did not send, at most (each waits a backoff). */
  maxNotSent?: number;
  /** Delay before attempt `n + 1` after `n` failed, ms. */
  backoff?: (failures: number) => number;
  /** Injected timer (tests). */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  signal?: AbortSignal;
  /** Each outcome, for progress and metrics. */
  observe?: (event: RunnerEvent) => void;
}

export type RunnerEvent =
  | { type: 'completed'; tokens: number }
  | { type: 'failed' }
  | { type: 'retried'; reason: string; counted: boolean };

export interface RunnerSummary {
  completed: number;
  failed: number;
  /** Stopped by `signal` before they were done. */
  abandoned: number;
}

const DEFAULT_MAX_NOT_SENT = 120;

function defaultBackoff(failures: number): number {
  return Math.min(10_000, 250 * 2 ** Math.max(0, failures - 1)) * (0.75 + Math.random() * 0.5);
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
}

/** How often `run` looks again at `limit()` while requests wait for room. */
const LIMIT_POLL_MS = 100;

interface Pending {
  request: BatchRequest;
  attempts: number;
  notSent: number;
}

function recordId(): string {
  return `batch_req_${randomUUID().replaceAll('-', '')}`;
}

function errorRecord(request: BatchRequest, outcome: SendOutcome): BatchOutputRecord {
  const base = { id: recordId(), custom_id: request.custom_id };
  if ((outcome.kind === 'rejected' || outcome.kind === 'retry') && outcome.status !== null) {
    const response = { status_code: outcome.status, request_id: outcome.requestId ?? '', body: outcome.body };
    return { ...base, response, error: null };
  }
  const message = outcome.kind === 'retry' || outcome.kind === 'not_sent' ? outcome.reason : 'failed';
  return { ...base, response: null, error: { code: 'request_failed', message } };
}

/**
 * Sends `requests`, pulled one at a time as there is room: a stream of them (the input read again)
 * is never read further ahead than the requests in flight.
 */
/**
 * A signal of its own for each request in flight, all aborted when the run's is. undici listens on
 * the signal it is given, and taking a listener off a signal scans its list: thousands of requests
 * sharing the run's one signal made that scan a tenth of the batch process's CPU.
 */
class RequestSignals {
  readonly #open = new Set<AbortController>();
  readonly #run: AbortSignal;

  readonly #abortAll = () => {
    for (const controller of this.#open) controller.abort(this.#run.reason);
  };

  constructor(run: AbortSignal) {
    this.#run = run;
    run.addEventListener('abort', this.#abortAll, { once: true });
  }

  /** The run ended: its signal no longer holds this. */
  dispose(): void {
    this.#run.removeEventListener('abort', this.#abortAll);
  }

  /** A signal for one request, aborted with the run; `release` it when the request settles. */
  take(): AbortController {
    const controller = new AbortController();
    if (this.#run.aborted) controller.abort(this.#run.reason);
    else this.#open.add(controller);
    return controller;
  }

  release(controller: AbortController): void {
    this.#open.delete(controller);
  }
}

/** What one run's attempts share. */
interface RunContext {
  opts: RunnerOptions;
  signal: AbortSignal;
  requestSignals: RequestSignals;
  summary: RunnerSummary;
  observe: (event: RunnerEvent) => void;
  sleep: NonNullable<RunnerOptions['sleep']>;
  backoff: NonNullable<RunnerOptions['backoff']>;
  maxNotSent: number;
}

/** A request settled: its answer to the output, or its last failure to the errors file. */
function finish(ctx: RunContext, item: Pending, outcome: SendOutcome): void {
  if (outcome.kind === 'answer') {
    ctx.opts.output.append({
      id: recordId(),
      custom_id: item.request.custom_id,
      response: { status_code: outcome.status, request_id: outcome.requestId, body: outcome.body },
      error: null,
    });
    ctx.summary.completed++;
    ctx.observe({ type: 'completed', tokens: outcome.tokens });
  } else {
    ctx.opts.errors.append(errorRecord(item.request, outcome));
    ctx.summary.failed++;
    ctx.observe({ type: 'failed' });
  }
}

/** Sends `item` until it is answered, rejected, out of attempts, or the run stops. */
async function attempt(ctx: RunContext, item: Pending): Promise<void> {
  const { opts, signal } = ctx;
  for (;;) {
    let outcome: SendOutcome;
    const request = ctx.requestSignals.take();
    try {
      outcome = await opts.send(item.request, request.signal);
    } catch (error) {
      if (signal.aborted) return;
      outcome = { kind: 'retry', reason: (error as Error).message, status: null, requestId: null, body: null };
    } finally {
      ctx.requestSignals.release(request);
    }
    if (signal.aborted) return;
    if (outcome.kind === 'answer' || outcome.kind === 'rejected') return finish(ctx, item, outcome);
    const counted = outcome.kind === 'retry';
    if (counted) item.attempts++;
    else item.notSent++;
    if (item.attempts >= opts.maxAttempts || item.notSent > ctx.maxNotSent) return finish(ctx, item, outcome);
    ctx.observe({ type: 'retried', reason: outcome.reason, counted });
    await ctx.sleep(ctx.backoff(item.attempts + item.notSent), signal);
    if (signal.aborted) return;
  }
}

export async function runBatch(
  requests: Iterable<BatchRequest> | AsyncIterable<BatchRequest>,
  opts: RunnerOptions,
): Promise<RunnerSummary> {
  const signal = opts.signal ?? new AbortController().signal;
  // Every backoff listens to it.
  setMaxListeners(0, signal);
  const summary: RunnerSummary = { completed: 0, failed: 0, abandoned: 0 };
  const ctx: RunContext = {
    opts,
    signal,
    requestSignals: new RequestSignals(signal),
    summary,
    observe: opts.observe ?? (() => {}),
    sleep: opts.sleep ?? sleepUnlessAborted,
    backoff: opts.backoff ?? defaultBackoff,
    maxNotSent: opts.maxNotSent ?? DEFAULT_MAX_NOT_SENT,
  };
  // A retry keeps its slot through its backoff: the fleet is not sent more than `limit()` at once.
  const source = Symbol.asyncIterator in requests ? requests[Symbol.asyncIterator]() : requests[Symbol.iterator]();
  let exhausted = false;
  let sourceError: { error: unknown } | null = null;
  let started = 0;
  let active = 0;
  let wake: (() => void) | null = null;
  const poke = () => {
    const w = wake;
    wake = null;
    w?.();
  };

  const start = (item: Pending) => {
    active++;
    void attempt(ctx, item).finally(() => {
      active--;
      poke();
    });
  };
  try {
    while (!signal.aborted) {
      while (!exhausted && active < opts.limit() && !signal.aborted) {
        let next: IteratorResult<BatchRequest>;
        try {
          next = await source.next();
        } catch (error) {
          // The source failed (the input changed under it): what is in flight finishes, then it is thrown.
          sourceError = { error };
          exhausted = true;
          break;
        }
        if (next.done) exhausted = true;
        else {
          started++;
          start({ request: next.value, attempts: 0, notSent: 0 });
        }
      }
      if (active === 0 && exhausted) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(poke, LIMIT_POLL_MS);
        const onAbort = () => poke();
        signal.addEventListener('abort', onAbort, { once: true });
        wake = () => {
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          resolve();
        };
      });
    }
  } finally {
    ctx.requestSignals.dispose();
    // Stopped early: the source (a file being read) is closed.
    if (!exhausted) await source.return?.();
  }
  if (sourceError !== null) throw sourceError.error;
  summary.abandoned = started - summary.completed - summary.failed;
  return summary;
}
