/**
 * The fleet as one undici `Dispatcher`, the way undici's `BalancedPool` is one: `dispatch` waits in
 * the central queue for a ready backend with a free slot, lets the policy pick it, and sends the
 * request on that backend's pool. The origin in the options is ignored: the fleet picks the backend.
 * A refused or reset connection is reported to the registry (which ejects) and, while no response
 * byte reached the handler, the request is re-sent to another ready backend; the body is a buffer
 * so POSTs can be re-sent too. A refusal by the queue (timeout, full, shutdown) reaches the handler
 * as an `AdmissionError`, which the HTTP side answers from its table (proxy/admission-refusals.ts), with `Retry-After`:
 * 503 while no backend is ready or fleetgate is shutting down (`fleetUnavailable`), 429 when the fleet
 * is up but the request's class is over its own `max_waiting` or `timeout`.
 *
 * Handlers are undici's callback handlers (onConnect, onHeaders, onData, onComplete, onError): the
 * interface undici's client calls, and the one its `request()`, `stream()` and `fetch()` (and so
 * @fastify/reply-from) hand in. Passing them through untouched spares each response a conversion of
 * its headers to an object and back, and each chunk two wrappers.
 */
import { type Dispatcher, Dispatcher as UndiciDispatcher } from 'undici';
import type { DrainDeadlines } from '../../fleet/drain-deadline.js';
import type { ProgressWatchdog } from '../../fleet/progress-watchdog.js';
import type { Backend, FleetRegistry } from '../../fleet/registry.js';
import { AdmissionError, type Lease, type WaitQueue } from '../queue/wait-queue.js';
import { type AttemptTrace, ClientGone, type ContextCarrier, RequestContext } from '../request-context.js';
import { type AttemptOwner, type CallbackHandler, FleetAttempt } from './fleet-attempt.js';
import { classifyUpstreamError, type UpstreamFailure } from './upstream-failures.js';
import type { UpstreamPools, UpstreamRequest } from './upstream-pools.js';

function isCallbackHandler(handler: Dispatcher.DispatchHandler): handler is CallbackHandler {
  return (
    typeof handler.onConnect === 'function' &&
    typeof handler.onHeaders === 'function' &&
    typeof handler.onData === 'function' &&
    typeof handler.onComplete === 'function' &&
    typeof handler.onError === 'function'
  );
}

/** What observers (metrics) hear of attempts; the registry hears outcomes directly. */
interface AttemptObserver {
  failed(backend: Backend, failure: UpstreamFailure): void;
  retried(backend: Backend): void;
}

export interface FleetDispatcherOptions {
  registry: Pick<FleetRegistry, 'apply'>;
  /** Where a request waits unless its context names its own queue (its model's). */
  queue: WaitQueue;
  pools: UpstreamPools;
  /** Re-sends after a connect-level failure, each to another backend where one is free. */
  retries: number;
  observer?: AttemptObserver;
  /** Told of every attempt; ends the ones stuck on a backend that makes no progress. */
  watchdog?: ProgressWatchdog<Backend>;
  /** Told of every attempt; ends the ones on a backend drained past its deadline. */
  drains?: DrainDeadlines<Backend>;
}

export class FleetDispatcher extends UndiciDispatcher implements ContextCarrier {
  readonly #opts: FleetDispatcherOptions;
  #closed = false;
  /** The context `carrying` hands to the dispatch it is waiting for. */
  #handed: RequestContext | null = null;

  constructor(opts: FleetDispatcherOptions) {
    super();
    this.#opts = opts;
  }

  override dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    if (!isCallbackHandler(handler)) {
      throw new TypeError('the fleet dispatcher takes undici callback handlers (onConnect, onHeaders, onData, ...)');
    }
    const context = this.#handed ?? new RequestContext();
    this.#handed = null;
    new FleetRequest(this.#opts, context, opts, handler).start(this.#closed);
    return true;
  }

  carrying<T>(context: RequestContext, send: () => T): T {
    this.#handed = context;
    try {
      return send();
    } finally {
      this.#handed = null;
    }
  }

  override async close(): Promise<void> {
    this.#closed = true;
    this.#opts.queue.close();
    await this.#opts.pools.close();
  }

  override async destroy(): Promise<void> {
    await this.close();
  }
}

class ClientGoneError extends Error {
  override name = 'ClientGoneError';
  readonly code = 'FLEETGATE_CLIENT_GONE';
}

/**
 * One request across its attempts. Its handler hears `onConnect` once, with `abort`, which cancels
 * the wait or the running attempt; then one attempt's response, or one error.
 */
class FleetRequest implements AttemptOwner {
  readonly #deps: FleetDispatcherOptions;
  readonly #handler: CallbackHandler;
  readonly #context: RequestContext;
  readonly #upstream: UpstreamRequest;
  readonly #method: string;
  /** Cancels a wait in the queue: aborted with the request. */
  readonly #cancelWait = new ClientGone();
  readonly #maxRetries: number;
  #attempt: FleetAttempt | null = null;
  /** The running attempt's span, when the request is traced. */
  #attemptTrace: AttemptTrace | null = null;
  #reason: Error | null = null;
  #done = false;

  constructor(
    deps: FleetDispatcherOptions,
    context: RequestContext,
    opts: Dispatcher.DispatchOptions,
    handler: CallbackHandler,
  ) {
    this.#deps = deps;
    this.#handler = handler;
    this.#context = context;
    this.#method = opts.method;
    this.#upstream = { method: opts.method, path: opts.path, headers: opts.headers, body: opts.body };
    // A streamed body cannot be sent twice.
    const replayable = opts.body == null || typeof opts.body === 'string' || opts.body instanceof Uint8Array;
    this.#maxRetries = replayable ? deps.retries : 0;
  }

  get context(): RequestContext {
    return this.#context;
  }

  get method(): string {
    return this.#method;
  }

  /** The `abort` the handler gets: the caller gives up (its body stream was destroyed, or its signal fired). */
  readonly abort = (reason?: Error): void => {
    if (this.#reason !== null || this.#done) return;
    this.#reason = reason ?? new ClientGoneError('request aborted');
    this.#context.clientGone.removeEventListener('abort', this.#onClientGone);
    if (this.#attempt !== null) this.#attempt.abort(this.#reason);
    else this.#cancelWait.abort();
  };

  start(closed: boolean): void {
    this.#handler.onConnect(this.abort);
    if (this.#reason !== null) {
      this.#fail(this.#reason);
      return;
    }
    if (closed) {
      const priority = this.#context.traits?.priority ?? '';
      this.#fail(new AdmissionError('shutdown', 'fleetgate is shutting down', priority, true));
      return;
    }
    this.#context.clientGone.addEventListener('abort', this.#onClientGone);
    this.#acquire();
  }

  readonly #onClientGone = () => this.abort(new ClientGoneError('client closed the connection'));

  #acquire(): void {
    const queue = this.#context.queue ?? this.#deps.queue;
    const context = this.#context;
    const admitted = queue.acquire(this.#cancelWait, context.tried, context.traits, context.continuation);
    if (admitted instanceof Promise) {
      const waitFrom = context.trace !== null ? performance.now() : 0;
      admitted.then(
        (lease) => {
          context.trace?.queued(waitFrom, performance.now());
          this.#send(lease);
        },
        (error: unknown) => {
          context.trace?.queued(waitFrom, performance.now());
          this.#fail(this.#reason ?? (error as Error));
        },
      );
    } else {
      this.#send(admitted);
    }
  }

  #send(lease: Lease): void {
    if (this.#reason !== null) {
      lease.release();
      this.#fail(this.#reason);
      return;
    }
    this.#context.tried ??= new Set();
    this.#context.tried.add(lease.backend);
    this.#context.backend = lease.backend.name;
    this.#context.dispatchedAt = performance.now();
    this.#attempt = new FleetAttempt(this, lease, this.#handler, this.#deps);
    const trace = this.#context.trace;
    this.#deps.pools.dispatch(
      lease.backend,
      trace === null ? this.#upstream : this.#traced(trace.attempt(lease.backend.name, this.#context.retries)),
      this.#attempt,
    );
  }

  /**
   * The request as this attempt sends it: its headers carry the attempt span's `traceparent`,
   * written over the previous attempt's in place (the headers are this request's own copy, and a
   * copy per attempt is garbage on every traced request).
   */
  #traced(attempt: AttemptTrace): UpstreamRequest {
    this.#attemptTrace = attempt;
    const headers = this.#upstream.headers;
    if (headers != null && !Array.isArray(headers) && typeof headers === 'object' && !(Symbol.iterator in headers)) {
      Object.assign(headers, attempt.headers);
    }
    return this.#upstream;
  }

  #attemptOver(failure: string | null): void {
    this.#attemptTrace?.ended(failure);
    this.#attemptTrace = null;
  }

  /** The attempt's response starts: the registry hears the status. */
  responded(backend: Backend, status: number): void {
    this.#attemptTrace?.responded(status);
    this.#deps.registry.apply(backend, { type: 'traffic', outcome: status >= 500 ? 'http_5xx' : 'ok' });
  }

  /** The attempt ended without success; `started`: its response had reached the handler. */
  attemptFailed(backend: Backend, error: Error, started: boolean, known?: UpstreamFailure): void {
    this.#attempt = null;
    if (this.#attemptTrace !== null) {
      this.#attemptOver(this.#reason !== null ? 'client_abort' : (known ?? classifyUpstreamError(error)).kind);
    }
    if (this.#reason !== null) {
      this.#fail(this.#reason);
      return;
    }
    const failure = known ?? classifyUpstreamError(error);
    if (failure.outcome !== null) {
      this.#deps.registry.apply(backend, { type: 'traffic', outcome: failure.outcome, detail: failure.kind });
    }
    this.#deps.observer?.failed(backend, failure);
    if (!started && failure.retryable && this.#context.retries < this.#maxRetries) {
      this.#context.retries++;
      this.#deps.observer?.retried(backend);
      this.#acquire();
      return;
    }
    this.#fail(error);
  }

  attemptEnded(): void {
    this.#attempt = null;
    this.#attemptOver(null);
    this.#finish();
  }

  #fail(error: Error): void {
    if (this.#done) return;
    this.#finish();
    this.#handler.onError(error);
  }

  #finish(): void {
    this.#done = true;
    this.#context.clientGone.removeEventListener('abort', this.#onClientGone);
  }
}
