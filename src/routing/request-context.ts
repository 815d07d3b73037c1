/**
 * A request's dispatch ticket: what routing needs to choose a backend and account for the request,
 * nothing else (the rest of the request is proxy/proxied-request.ts's). Its owner fills it and hands
 * it to the fleet dispatcher with the one dispatch it makes (`ContextCarrier.carrying`): nothing of
 * it travels in the request's headers or body.
 */

import type { Backend } from '../fleet/registry.js';
import type { AbortLike, WaitQueue } from './queue/wait-queue.js';
import type { RequestTraits } from './request-traits.js';

/**
 * `AbortController` builds on EventTarget, whose creation and listeners showed in the traffic path's
 * profile (docs/benchmarks.md, bench:overhead); the queue and the dispatcher need only this much.
 */
export class ClientGone implements AbortLike {
  aborted = false;
  #listeners: Array<() => void> = [];

  addEventListener(_type: 'abort', listener: () => void): void {
    this.#listeners.push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const index = this.#listeners.indexOf(listener);
    if (index >= 0) this.#listeners.splice(index, 1);
  }

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    for (const listener of this.#listeners.splice(0)) listener();
  }
}

/**
 * A request's trace (proxy/request-trace.ts builds it when `tracing` is on): what dispatch and
 * resume tell it. Null on the context when tracing is off, so the request path checks one field.
 */
export interface RequestTrace {
  /** The request waited in its queue from `from` to `to` (performance.now()), leased or refused. */
  queued(from: number, to: number): void;
  /** An attempt leaves for `backend` (`retry`: attempts before it); it carries the returned headers. */
  attempt(backend: string, retry: number): AttemptTrace;
  /** A cut stream was continued on `to` (null: it was not) after `from` failed, since `startedAt`. */
  resumed(from: string, to: string | null, reason: string, startedAt: number): void;
  /** The stream's current attempt was cut (`failure`: `error_event`, `closed`, ...): it ends so. */
  cut(failure: string): void;
}

export interface AttemptTrace {
  /** `traceparent` (and `tracestate`) naming the attempt's span. */
  readonly headers: Record<string, string>;
  responded(status: number): void;
  /**
   * The attempt is over: `failure`, its kind (`reset`, `connect_refused`, ...), or null when it
   * completed. Only its first ending counts (a cut stream's is the cut's).
   */
  ended(failure: string | null): void;
}

/**
 * Everything the fleet dispatcher needs to know of one request beyond its method, path, headers and
 * body, filled once by the HTTP side before dispatch.
 */
export class RequestContext {
  /** Aborted when the client goes away: a waiting request leaves the queue, a running one is cancelled. */
  readonly clientGone = new ClientGone();
  /** Its priority class and API key, and the prompt traits for a policy that routes on them. */
  traits: RequestTraits | undefined = undefined;
  /** The queue it waits in (its model's); the dispatcher's own queue when unset. */
  queue: WaitQueue | undefined = undefined;
  /** The body asks for a stream (`"stream": true`), read only while the progress watchdog is on (else false); a continuation always is. */
  streamed = false;
  /** Set by the dispatcher: the backend of the latest attempt, and attempts beyond the first. */
  backend: string | null = null;
  retries = 0;
  /**
   * Backends its attempts went to, shared with the dispatcher: a continuation of its stream
   * (proxy/stream-resume.ts) starts with them, so it goes elsewhere where it can.
   */
  tried: Set<Backend> | undefined = undefined;
  /** A stream's continuation: it waits at the head of its class's queue (WaitQueue.acquire `first`). */
  continuation = false;
  /** Set by the dispatcher: performance.now() when the latest attempt left the queue for its backend. */
  dispatchedAt: number | null = null;
  /** Its trace; null while tracing is off. */
  trace: RequestTrace | null = null;

  /**
   * The context of a continuation of this request's stream: the same class, key, model queue and
   * trace, the backends tried so far (so it goes elsewhere where it can), at the head of its class.
   */
  forContinuation(): RequestContext {
    const next = new RequestContext();
    next.traits = this.traits;
    next.queue = this.queue;
    next.streamed = true;
    next.continuation = true;
    next.trace = this.trace;
    next.tried = new Set(this.tried ?? []);
    return next;
  }
}

/**
 * Hands a request's context to the dispatch `send` makes. @fastify/reply-from passes a dispatcher
 * nothing of its own per request, but both it (retries off) and undici's `request()` call
 * `dispatch` synchronously, once, within the call: the context is taken there.
 */
export interface ContextCarrier {
  carrying<T>(context: RequestContext, send: () => T): T;
}
