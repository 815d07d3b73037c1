/**
 * Relays one upstream exchange to the client as an undici dispatch handler: bytes go from undici's
 * parser straight to the client socket (no Readable in between, no copies), with backpressure both
 * ways. Every ending is deliberate and reported once: the client leaving aborts the upstream (SGLang
 * then frees the GPU work); an upstream dying mid-SSE ends the stream with one error event and no
 * `data: [DONE]`, so no client takes a cut answer for a whole one; a cut plain body destroys the
 * client connection so it cannot look complete. A failure before any response byte leaves the
 * client untouched, so the caller may retry elsewhere. A client that takes no bytes for the stream
 * idle timeout is cut off like an upstream that sends none: while it stalls, undici's own body
 * timeout is suspended, and the backend would hold the request's GPU slot for as long as the client
 * keeps the connection open.
 */
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import { errorBody, errorTypeFor } from '../http/openai-error.js';
import { clientResponseHeaders } from './headers.js';
import { classifyUpstreamError, type UpstreamFailure } from './upstream-errors.js';

export type RelayEnd =
  | { type: 'complete' }
  | { type: 'client_abort' }
  | { type: 'upstream_error'; failure: UpstreamFailure };

export interface RelayResult {
  end: RelayEnd;
  /** Whether the response started (its status went to the client): if not, a retry is safe. */
  started: boolean;
  bytes: number;
  /** When (on the relay's clock) the first body chunk was written; null if none. */
  firstByteAt: number | null;
  /** The last bytes of the body, enough to find a trailing `usage` object. */
  tail: Buffer | null;
}

export interface RelayHooks {
  /** Status and headers are in and nothing went to the client yet: a failure refuses the response. */
  check(status: number, headers: IncomingHttpHeaders): UpstreamFailure | null;
  /** The response starts: called right before its status and headers are written. */
  started(status: number, sse: boolean): void;
  ended(result: RelayResult): void;
}

export interface RelayOptions {
  now: () => number;
  /** ms a client may take no bytes before it is cut off; 0 = no limit. */
  clientStallTimeout: number;
}

const TAIL_BYTES = 2048;

class ClientGoneError extends Error {
  override name = 'ClientGoneError';
}

export class ResponseRelay implements Dispatcher.DispatchHandler {
  readonly #raw: ServerResponse;
  readonly #hooks: RelayHooks;
  readonly #now: () => number;
  readonly #stallTimeout: number;
  #stallTimer: NodeJS.Timeout | null = null;
  #controller: Dispatcher.DispatchController | null = null;
  #state: 'waiting' | 'relaying' | 'done' = 'waiting';
  #sse = false;
  #corked = false;
  #bytes = 0;
  #firstByteAt: number | null = null;
  #last: Buffer | null = null;
  #previous: Buffer | null = null;

  constructor(raw: ServerResponse, hooks: RelayHooks, opts: RelayOptions) {
    this.#raw = raw;
    this.#hooks = hooks;
    this.#now = opts.now;
    this.#stallTimeout = opts.clientStallTimeout;
  }

  /** The client left: abort the upstream exchange, whatever its stage. */
  cancel(): void {
    if (this.#state === 'done') return;
    this.#finish({ type: 'client_abort' });
    // Before undici connected the request there is nothing to abort yet; onRequestStart does it.
    this.#controller?.abort(new ClientGoneError('client closed the connection'));
  }

  /** Response body bytes relayed so far. */
  get bytes(): number {
    return this.#bytes;
  }

  /** fleetgate gives up on the exchange (the progress watchdog): it ends as that upstream failure would. */
  abandon(failure: UpstreamFailure): void {
    if (this.#state === 'done') return;
    if (this.#state === 'relaying') this.#cutResponse(failure);
    this.#finish({ type: 'upstream_error', failure });
    this.#controller?.abort(new Error(failure.message));
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    // Cancelled or abandoned before undici connected the request.
    if (this.#state === 'done') controller.abort(new ClientGoneError('client closed the connection'));
  }

  onResponseStart(controller: Dispatcher.DispatchController, status: number, headers: IncomingHttpHeaders): void {
    if (this.#state !== 'waiting') return;
    // 1xx interim responses (e.g. 100 Continue) are not the answer.
    if (status < 200) return;
    const refusal = this.#hooks.check(status, headers);
    if (refusal !== null) {
      this.#finish({ type: 'upstream_error', failure: refusal });
      controller.abort(new Error(refusal.message));
      return;
    }
    this.#state = 'relaying';
    this.#sse = String(headers['content-type'] ?? '').startsWith('text/event-stream');
    this.#hooks.started(status, this.#sse);
    this.#raw.writeHead(status, clientResponseHeaders(headers));
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#state !== 'relaying') return;
    if (this.#firstByteAt === null) this.#firstByteAt = this.#now();
    this.#bytes += chunk.length;
    this.#previous = this.#last;
    this.#last = chunk;
    const raw = this.#raw;
    // The chunks undici parses from one read leave in one writev, as NGINX and HAProxy send them.
    if (this.#sse && !this.#corked) {
      this.#corked = true;
      raw.cork();
      process.nextTick(uncork, this);
    }
    if (!raw.write(chunk) && !controller.paused) {
      controller.pause();
      // Listened for only while paused: most answers never fill the socket's buffer.
      raw.once('drain', () => {
        if (this.#state !== 'relaying') return;
        this.#clearStallTimer();
        controller.resume();
      });
      if (this.#stallTimeout > 0 && this.#stallTimer === null) {
        this.#stallTimer = setTimeout(() => this.#clientStalled(), this.#stallTimeout);
      }
    }
  }

  #clientStalled(): void {
    this.#stallTimer = null;
    if (this.#state !== 'relaying') return;
    this.cancel();
    this.#raw.destroy();
  }

  #clearStallTimer(): void {
    if (this.#stallTimer === null) return;
    clearTimeout(this.#stallTimer);
    this.#stallTimer = null;
  }

  onResponseEnd(): void {
    if (this.#state !== 'relaying') return;
    this.#uncork();
    this.#raw.end();
    this.#finish({ type: 'complete' });
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    if (this.#state === 'done') return;
    const failure = classifyUpstreamError(error);
    if (this.#state === 'relaying') this.#cutResponse(failure);
    this.#finish({ type: 'upstream_error', failure });
  }

  #cutResponse(failure: UpstreamFailure): void {
    const raw = this.#raw;
    if (raw.writableEnded || raw.destroyed) return;
    if (!this.#sse) {
      raw.destroy();
      return;
    }
    this.#uncork();
    const separator = this.#bytes > 0 && !endsEvent(this.#last) ? '\n\n' : '';
    raw.end(`${separator}data: ${errorBody(failure.message, errorTypeFor(failure.status), failure.status)}\n\n`);
  }

  #finish(end: RelayEnd): void {
    const started = this.#state === 'relaying';
    this.#state = 'done';
    this.#clearStallTimer();
    this.#hooks.ended({
      end,
      started,
      bytes: this.#bytes,
      firstByteAt: this.#firstByteAt,
      tail: tailOf(this.#previous, this.#last),
    });
  }

  /**
   * Writes what the tick's cork held. Before `end()` too: on Node 22 an `end()` while corked drops
   * the corked chunks (a stream ended 200 without its last events and `[DONE]`).
   */
  #uncork(): void {
    if (!this.#corked) return;
    this.#corked = false;
    this.#raw.uncork();
  }

  static uncork(relay: ResponseRelay): void {
    relay.#uncork();
  }
}

const uncork = ResponseRelay.uncork;

function endsEvent(chunk: Buffer | null): boolean {
  return chunk !== null && chunk.length >= 2 && chunk[chunk.length - 1] === 0x0a && chunk[chunk.length - 2] === 0x0a;
}

function tailOf(previous: Buffer | null, last: Buffer | null): Buffer | null {
  if (last === null) return null;
  if (last.length >= TAIL_BYTES || previous === null) return last.subarray(Math.max(0, last.length - TAIL_BYTES));
  const fromPrevious = previous.subarray(Math.max(0, previous.length - (TAIL_BYTES - last.length)));
  return Buffer.concat([fromPrevious, last]);
}

const COMPLETION_TOKENS = Buffer.from('"completion_tokens"');

/** The last `completion_tokens` figure in the tail (OpenAI `usage`, SGLang `meta_info`). */
export function completionTokensIn(tail: Buffer | null): number | null {
  if (tail === null) return null;
  const at = tail.lastIndexOf(COMPLETION_TOKENS);
  if (at < 0) return null;
  let i = at + COMPLETION_TOKENS.length;
  while (i < tail.length && (tail[i] === 0x20 || tail[i] === 0x3a) /* : */) i++;
  let value = 0;
  let digits = 0;
  for (; i < tail.length && tail[i] >= 0x30 && tail[i] <= 0x39; i++, digits++) value = value * 10 + tail[i] - 0x30;
  return digits > 0 ? value : null;
}
