/**
 * Relays an upstream response body (the Readable that @fastify/reply-from hands to `onResponse`) to
 * the client, with backpressure both ways. Every ending is deliberate and reported once: the client
 * leaving destroys the body, which aborts the upstream (SGLang then frees the GPU work); an upstream
 * dying mid-SSE ends the stream with one error event and no `data: [DONE]`, so no client takes a cut
 * answer for a whole one; a cut plain body destroys the client connection so it cannot look
 * complete. A client that takes no bytes for the stream idle timeout is cut off like an upstream
 * that sends none: while it stalls, undici's own body timeout is suspended, and the backend would
 * hold the request's GPU slot for as long as the client keeps the connection open. A stream with a
 * `resume` (stream-resume.ts) is cut by nothing of the upstream's: the relay hands the cut to it and
 * relays the continuation it returns, or writes the error event it lets stand. An SSE answer's
 * chunks go through its one reader (stream-journal.ts): what the client gets (whole events, with a
 * resume), the content events the token clock times, the error event and `[DONE]` the resume reads.
 */
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { errorBody, errorTypeFor } from '../http/openai-error.js';
import { classifyUpstreamError, type UpstreamFailure } from '../routing/dispatch/upstream-failures.js';
import { reasoningTokensIn } from './answer-tail.js';
import type { StreamJournal } from './stream-journal.js';
import { EARLY_END_FAILURE, ERROR_EVENT_FAILURE, type ResumeStep, type StreamResume } from './stream-resume.js';
import type { TokenClock } from './token-timing.js';

type RelayEnd = { type: 'complete' } | { type: 'client_abort' } | { type: 'upstream_error'; failure: UpstreamFailure };

export interface RelayResult {
  end: RelayEnd;
  bytes: number;
  /** When (on the relay's clock) the first body chunk was written; null if none. */
  firstByteAt: number | null;
  /** The last bytes of the body, enough to find a trailing `usage` object. */
  tail: Buffer | null;
}

export interface RelayOptions {
  sse: boolean;
  now: () => number;
  /** ms a client may take no bytes before it is cut off; 0 = no limit. */
  clientStallTimeout: number;
  /** The stream's one reader: each chunk is framed and read once, here. Required with `resume`. */
  reader?: StreamJournal;
  /** Continues a stream the upstream cuts; absent, a cut ends it. */
  resume?: StreamResume;
  /** Times a stream's content events as they go out (token-timing.ts); absent, none are read. */
  tokens?: TokenClock;
  ended(result: RelayResult): void;
}

const TAIL_BYTES = 2048;

/** Starts relaying `body` to `raw`, whose status and headers were written. */
export function relayBody(body: Readable, raw: ServerResponse, opts: RelayOptions): void {
  new ResponseRelay(body, raw, opts).start();
}

class ResponseRelay {
  #body: Readable;
  readonly #raw: ServerResponse;
  readonly #opts: RelayOptions;
  #stallTimer: NodeJS.Timeout | null = null;
  #done = false;
  #corked = false;
  #bytes = 0;
  #firstByteAt: number | null = null;
  #last: Buffer | null = null;
  #previous: Buffer | null = null;

  constructor(body: Readable, raw: ServerResponse, opts: RelayOptions) {
    this.#body = body;
    this.#raw = raw;
    this.#opts = opts;
  }

  start(): void {
    this.#raw.once('close', this.#onClientClose);
    this.#listen(this.#body);
  }

  #listen(body: Readable): void {
    body.on('data', this.#onData);
    body.once('end', this.#onEnd);
    body.once('error', this.#onError);
  }

  readonly #onData = (upstream: Buffer) => {
    if (this.#done) return;
    const reader = this.#opts.reader;
    if (reader === undefined) {
      this.#write(upstream, 0, false);
      return;
    }
    const chunk = reader.feed(upstream);
    this.#write(chunk, reader.fedEvents, reader.answered);
    if (this.#opts.resume !== undefined && reader.errorEvent !== null) this.#interrupt(ERROR_EVENT_FAILURE);
  };

  /** Writes `chunk`, which holds `events` content events; `answered`: the answer has begun. */
  #write(chunk: Buffer, events: number, answered: boolean): void {
    if (chunk.length === 0) return;
    if (this.#firstByteAt === null) this.#firstByteAt = this.#opts.now();
    if (events > 0) this.#opts.tokens?.seen(events, this.#opts.now(), answered);
    this.#bytes += chunk.length;
    this.#previous = this.#last;
    this.#last = chunk;
    const raw = this.#raw;
    // The chunks undici parses from one read leave in one writev, as NGINX and HAProxy send them.
    if (this.#opts.sse && !this.#corked) {
      this.#corked = true;
      raw.cork();
      process.nextTick(uncork, this);
    }
    if (!raw.write(chunk) && !this.#body.isPaused()) {
      this.#body.pause();
      // Listened for only while paused: most answers never fill the socket's buffer.
      raw.once('drain', this.#onDrain);
      if (this.#opts.clientStallTimeout > 0 && this.#stallTimer === null) {
        this.#stallTimer = setTimeout(this.#clientStalled, this.#opts.clientStallTimeout);
      }
    }
  }

  readonly #onDrain = () => {
    if (this.#done) return;
    this.#clearStallTimer();
    this.#body.resume();
  };

  readonly #clientStalled = () => {
    this.#stallTimer = null;
    if (this.#done) return;
    this.#finish({ type: 'client_abort' });
    this.#body.destroy();
    this.#raw.destroy();
  };

  readonly #onEnd = () => {
    if (this.#done) return;
    if (this.#opts.resume !== undefined && this.#opts.reader?.done !== true) {
      this.#interrupt(EARLY_END_FAILURE);
      return;
    }
    this.#uncork();
    this.#raw.end();
    this.#finish({ type: 'complete' });
  };

  readonly #onError = (error: Error) => {
    if (this.#done) return;
    const failure = classifyUpstreamError(error);
    if (this.#opts.resume !== undefined) {
      this.#interrupt(failure);
      return;
    }
    this.#cutResponse(failure);
    this.#finish({ type: 'upstream_error', failure });
  };

  /** The upstream attempt ended early: the resume decides what follows, while the client waits. */
  #interrupt(failure: UpstreamFailure): void {
    const old = this.#body;
    old.off('data', this.#onData);
    old.off('end', this.#onEnd);
    old.off('error', this.#onError);
    old.on('error', noop);
    const resume = this.#opts.resume as StreamResume;
    resume.cut(failure);
    old.destroy();
    resume.resume(failure).then(
      (step) => this.#resumed(step, failure),
      () => this.#resumed({ type: 'fail', event: null }, failure),
    );
  }

  #resumed(step: ResumeStep, failure: UpstreamFailure): void {
    if (this.#done) {
      if (step.type === 'continue') step.body.destroy();
      return;
    }
    if (step.type === 'continue') {
      const backends = (this.#opts.resume as StreamResume).backends;
      this.#opts.tokens?.switchTo(backends[backends.length - 1]);
      this.#body = step.body;
      this.#listen(step.body);
      return;
    }
    if (step.type === 'end') {
      this.#uncork();
      this.#raw.end(step.tail);
      this.#finish({ type: 'complete' });
      return;
    }
    this.#cutResponse(failure, step.event);
    this.#finish({ type: 'upstream_error', failure });
  }

  readonly #onClientClose = () => {
    if (this.#done || this.#raw.writableFinished) return;
    this.#finish({ type: 'client_abort' });
    this.#body.destroy();
    this.#opts.resume?.cancel();
  };

  /** `event`: the upstream's own error event, written instead of fleetgate's. */
  #cutResponse(failure: UpstreamFailure, event: Buffer | null = null): void {
    const raw = this.#raw;
    if (raw.writableEnded || raw.destroyed) return;
    if (!this.#opts.sse) {
      raw.destroy();
      return;
    }
    this.#uncork();
    if (event !== null) {
      raw.end(event);
      return;
    }
    // With a resume only whole events went out; without one the last may be cut short.
    const separator = this.#opts.resume === undefined && this.#bytes > 0 && !endsEvent(this.#last) ? '\n\n' : '';
    raw.end(`${separator}data: ${errorBody(failure.message, errorTypeFor(failure.status), failure.status)}\n\n`);
  }

  #clearStallTimer(): void {
    if (this.#stallTimer === null) return;
    clearTimeout(this.#stallTimer);
    this.#stallTimer = null;
  }

  #finish(end: RelayEnd): void {
    this.#done = true;
    this.#clearStallTimer();
    this.#raw.off('close', this.#onClientClose);
    this.#body.off('data', this.#onData);
    // A late 'error' (a destroyed body) must not be unhandled.
    this.#body.on('error', noop);
    const tail = tailOf(this.#previous, this.#last);
    const tokens = this.#opts.tokens;
    if (tokens !== undefined && end.type === 'complete') {
      const reader = this.#opts.reader;
      tokens.reasoned(reader !== undefined ? reader.reasoningTokens : reasoningTokensIn(tail));
    }
    this.#opts.ended({ end, bytes: this.#bytes, firstByteAt: this.#firstByteAt, tail });
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

function noop(): void {}

function endsEvent(chunk: Buffer | null): boolean {
  return chunk !== null && chunk.length >= 2 && chunk[chunk.length - 1] === 0x0a && chunk[chunk.length - 2] === 0x0a;
}

function tailOf(previous: Buffer | null, last: Buffer | null): Buffer | null {
  if (last === null) return null;
  if (last.length >= TAIL_BYTES || previous === null) return last.subarray(Math.max(0, last.length - TAIL_BYTES));
  const fromPrevious = previous.subarray(Math.max(0, previous.length - (TAIL_BYTES - last.length)));
  return Buffer.concat([fromPrevious, last]);
}
