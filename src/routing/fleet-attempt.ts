/**
 * One attempt of a request on one backend: the undici handler that the backend's pool calls. It
 * holds the lease (released exactly once, at the attempt's end), refuses an answer that is not the
 * API's, and passes the response through to the request's handler. This is the one place that sees
 * an attempt dispatched, its response bytes and its end, and that can end it (`abort`): the progress
 * watchdog's hooks are here (`track` at the start, `done` at the end, `end` aborts).
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import type { ProgressWatchdog, TrackedRequest } from '../fleet/progress-watchdog.js';
import type { Backend } from '../fleet/registry.js';
import type { FleetRequest } from './fleet-dispatcher.js';
import { classifyUpstreamError, NoProgressError } from './upstream-failures.js';
import type { Lease } from './wait-queue.js';

class HtmlAnswerError extends Error {
  override name = 'HtmlAnswerError';
  readonly code = 'FLEETGATE_HTML_ANSWER';
}

/**
 * A web page in answer to an API call (POST) means something else answers on the backend's port (a
 * dashboard, a default nginx page); SGLang, vLLM and OpenAI servers answer JSON or SSE. A GET (e.g.
 * FastAPI's `/docs`) is passed as it is.
 */
function isHtmlAnswerToApiCall(method: string, status: number, headers: IncomingHttpHeaders): boolean {
  return method === 'POST' && status < 300 && /^\s*text\/html/i.test(String(headers['content-type']));
}

export class FleetAttempt implements Dispatcher.DispatchHandler {
  readonly #request: FleetRequest;
  readonly #lease: Lease;
  readonly #handler: Dispatcher.DispatchHandler;
  readonly #tracked: TrackedRequest | null;
  #controller: Dispatcher.DispatchController | null = null;
  #abortReason: Error | null = null;
  #status = 0;
  /** Body bytes of a 2xx answer passed on: the watchdog's measure of progress. */
  #okBytes = 0;
  #started = false;
  #ended = false;

  constructor(
    request: FleetRequest,
    lease: Lease,
    handler: Dispatcher.DispatchHandler,
    watchdog?: ProgressWatchdog<Backend>,
  ) {
    this.#request = request;
    this.#lease = lease;
    this.#handler = handler;
    this.#tracked =
      watchdog?.enabled === true
        ? watchdog.track(lease.backend, {
            streamed: request.context.streamed,
            bytes: () => this.#okBytes,
            // Ends as an upstream failure would: re-sent if nothing reached the client, else cut.
            end: (reason) => this.abort(new NoProgressError(reason)),
          })
        : null;
  }

  get paused(): boolean {
    return this.#controller?.paused ?? false;
  }

  /** Ends the attempt (the client left, or a watchdog gave up on it). */
  abort(reason: Error): void {
    if (this.#ended) return;
    this.#abortReason = reason;
    // Before the pool started the request there is nothing to abort yet; onRequestStart does it.
    this.#controller?.abort(reason);
  }

  pause(): void {
    this.#controller?.pause();
  }

  resume(): void {
    this.#controller?.resume();
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.#abortReason !== null) controller.abort(this.#abortReason);
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    status: number,
    headers: IncomingHttpHeaders,
    statusMessage?: string,
  ): void {
    if (this.#ended) return;
    // 1xx interim responses (e.g. 100 Continue) are not the answer.
    if (status < 200) return;
    if (isHtmlAnswerToApiCall(this.#request.method, status, headers)) {
      const error = new HtmlAnswerError(
        'backend answered an API call with an HTML page (is another server listening on its port?)',
      );
      this.#end(false);
      this.#request.attemptFailed(this.#lease.backend, error, false, classifyUpstreamError(error));
      controller.abort(error);
      return;
    }
    this.#started = true;
    this.#status = status;
    this.#request.responded(this.#lease.backend, status);
    this.#handler.onResponseStart?.(this.#request, status, headers, statusMessage);
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#ended) return;
    if (this.#status < 300) this.#okBytes += chunk.length;
    this.#handler.onResponseData?.(this.#request, chunk);
  }

  onResponseEnd(_controller: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void {
    if (this.#ended) return;
    this.#end(this.#status < 300);
    this.#request.attemptEnded();
    this.#handler.onResponseEnd?.(this.#request, trailers);
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    if (this.#ended) return;
    this.#end(false);
    this.#request.attemptFailed(this.#lease.backend, error, this.#started);
  }

  /** `completed`: a whole successful answer went out. */
  #end(completed: boolean): void {
    this.#ended = true;
    this.#lease.release();
    this.#tracked?.done(completed);
  }
}
