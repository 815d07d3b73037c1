/**
 * One attempt of a request on one backend: the undici handler that the backend's pool calls. It
 * holds the lease (released exactly once, at the attempt's end), refuses an answer that is not the
 * API's, and passes the response through to the request's handler. This is the one place that sees
 * an attempt dispatched, its response bytes and its end, and that can end it (`abort`): the progress
 * watchdog's hooks are here (`track` at the start, `done` at the end, `end` aborts), and the drain
 * deadline's (`track`, `untrack`, `endDrained` aborts).
 *
 * It speaks undici's callback interface (onConnect, onHeaders, onData, onComplete, onError), the
 * one undici's client calls and its `request()` (hence @fastify/reply-from) hands in: the raw headers
 * and each chunk pass straight through, with no conversion to and from the controller interface.
 */

import type { Dispatcher } from 'undici';
import type { DrainDeadlines } from '../../fleet/drain-deadline.js';
import type { ProgressWatchdog, TrackedRequest } from '../../fleet/progress-watchdog.js';
import type { Backend } from '../../fleet/registry.js';
import type { Lease } from '../queue/wait-queue.js';
import type { RequestContext } from '../request-context.js';
import { DrainDeadlineError, NoProgressError } from './upstream-failures.js';

class HtmlAnswerError extends Error {
  override name = 'HtmlAnswerError';
  readonly code = 'FLEETGATE_HTML_ANSWER';
}

const CONTENT_TYPE = 'content-type';
const HTML = /^\s*text\/html/i;

/**
 * A web page in answer to an API call (POST) means something else answers on the backend's port (a
 * dashboard, a default nginx page); SGLang, vLLM and OpenAI servers answer JSON or SSE. A GET (e.g.
 * FastAPI's `/docs`) is passed as it is.
 */
function isHtmlAnswerToApiCall(method: string, status: number, rawHeaders: ReadonlyArray<Buffer | string>): boolean {
  if (method !== 'POST' || status >= 300) return false;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i];
    if (name.length === CONTENT_TYPE.length && name.toString().toLowerCase() === CONTENT_TYPE) {
      return HTML.test(rawHeaders[i + 1].toString());
    }
  }
  return false;
}

/** undici's callback handler, all of whose methods the fleet calls. */
export type CallbackHandler = Required<
  Pick<Dispatcher.DispatchHandler, 'onConnect' | 'onHeaders' | 'onData' | 'onComplete' | 'onError'>
>;

/** The fleet's trackers of running attempts (fleet.ts owns them). */
export interface AttemptTrackers {
  watchdog?: ProgressWatchdog<Backend>;
  drains?: DrainDeadlines<Backend>;
}

/** What an attempt reports to the request it belongs to (fleet-dispatcher.ts's FleetRequest). */
export interface AttemptOwner {
  readonly context: RequestContext;
  readonly method: string;
  responded(backend: Backend, status: number): void;
  attemptEnded(): void;
  attemptFailed(backend: Backend, error: Error, started: boolean): void;
}

export class FleetAttempt implements CallbackHandler {
  readonly #request: AttemptOwner;
  readonly #lease: Lease;
  readonly #handler: CallbackHandler;
  readonly #tracked: TrackedRequest | null;
  readonly #drains: DrainDeadlines<Backend> | undefined;
  #abort: ((reason: Error) => void) | null = null;
  #abortReason: Error | null = null;
  #status = 0;
  /** Body bytes of a 2xx answer passed on: the watchdog's measure of progress. */
  #okBytes = 0;
  #started = false;
  #ended = false;

  constructor(request: AttemptOwner, lease: Lease, handler: CallbackHandler, { watchdog, drains }: AttemptTrackers) {
    this.#request = request;
    this.#lease = lease;
    this.#handler = handler;
    this.#tracked = watchdog?.enabled === true ? watchdog.track(lease.backend, this) : null;
    this.#drains = drains;
    drains?.track(lease.backend, this);
  }

  // What the progress watchdog reads and calls (its TrackedRequestSpec).

  get streamed(): boolean {
    return this.#request.context.streamed;
  }

  bytes(): number {
    return this.#okBytes;
  }

  /** The watchdog gives up: ends as an upstream failure would (re-sent if nothing reached the client, else cut). */
  end(reason: string): void {
    this.abort(new NoProgressError(reason));
  }

  /** Its backend was drained past its deadline: ends as the watchdog's `end` does. */
  endDrained(reason: string): void {
    this.abort(new DrainDeadlineError(reason));
  }

  /** Ends the attempt (the client left, the watchdog gave up on it, or its backend's drain deadline passed). */
  abort(reason: Error): void {
    if (this.#ended) return;
    this.#abortReason = reason;
    // Before the pool connected the request there is nothing to abort yet; onConnect does it.
    this.#abort?.(reason);
  }

  onConnect(abort: (reason?: Error) => void): void {
    this.#abort = abort;
    if (this.#abortReason !== null) abort(this.#abortReason);
  }

  onHeaders(status: number, rawHeaders: Buffer[], resume: () => void, statusMessage: string): boolean {
    if (this.#ended) return false;
    // 1xx interim responses (e.g. 100 Continue) are not the answer.
    if (status < 200) return true;
    if (isHtmlAnswerToApiCall(this.#request.method, status, rawHeaders)) {
      const error = new HtmlAnswerError(
        'backend answered an API call with an HTML page (is another server listening on its port?)',
      );
      this.#end(false);
      this.#request.attemptFailed(this.#lease.backend, error, false);
      this.#abort?.(error);
      return false;
    }
    this.#started = true;
    this.#status = status;
    this.#request.responded(this.#lease.backend, status);
    return this.#handler.onHeaders(status, rawHeaders, resume, statusMessage);
  }

  onData(chunk: Buffer): boolean {
    if (this.#ended) return false;
    if (this.#status < 300) this.#okBytes += chunk.length;
    return this.#handler.onData(chunk);
  }

  onComplete(trailers: string[] | null): void {
    if (this.#ended) return;
    this.#end(this.#status < 300);
    this.#request.attemptEnded();
    this.#handler.onComplete(trailers);
  }

  onError(error: Error): void {
    if (this.#ended) return;
    this.#end(false);
    this.#request.attemptFailed(this.#lease.backend, error, this.#started);
  }

  /** `completed`: a whole successful answer went out. */
  #end(completed: boolean): void {
    this.#ended = true;
    this.#lease.release();
    this.#tracked?.done(completed);
    this.#drains?.untrack(this.#lease.backend, this);
  }
}
