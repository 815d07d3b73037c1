/**
 * Writes an upstream response to the client, chunk by chunk, with backpressure and no copies.
 * Every ending is deliberate: the client leaving aborts the upstream; an upstream dying mid-SSE
 * ends the stream with one error event and no `data: [DONE]`, so no client takes a cut answer for
 * a whole one; a cut plain body destroys the client connection so it cannot look complete.
 */
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { classifyUpstreamError, errorBody, type UpstreamFailure } from './upstream-errors.js';

export type PipeEnd =
  | { type: 'complete' }
  | { type: 'client_abort' }
  | { type: 'upstream_error'; failure: UpstreamFailure };

export interface PipeResult {
  end: PipeEnd;
  bytes: number;
  /** ms from the pipe's start to the first chunk written; null if none. */
  firstByteAt: number | null;
  /** The last bytes of the body, enough to find a trailing `usage` object. */
  tail: Buffer | null;
}

const TAIL_BYTES = 2048;

export function pipeResponse(
  body: Readable,
  raw: ServerResponse,
  sse: boolean,
  now: () => number,
  onEnd: (result: PipeResult) => void,
): void {
  let bytes = 0;
  let firstByteAt: number | null = null;
  let last: Buffer | null = null;
  let previous: Buffer | null = null;
  let ended = false;

  const finish = (end: PipeEnd) => {
    if (ended) return;
    ended = true;
    body.off('data', onData);
    raw.off('drain', onDrain);
    onEnd({ end, bytes, firstByteAt, tail: tailOf(previous, last) });
  };

  const onData = (chunk: Buffer) => {
    if (firstByteAt === null) firstByteAt = now();
    bytes += chunk.length;
    previous = last;
    last = chunk;
    if (!raw.write(chunk)) body.pause();
  };
  const onDrain = () => body.resume();

  body.on('data', onData);
  raw.on('drain', onDrain);
  body.once('end', () => {
    raw.end();
    finish({ type: 'complete' });
  });
  body.once('error', (error) => {
    const failure = classifyUpstreamError(error);
    if (raw.writableEnded || raw.destroyed) {
      finish({ type: 'client_abort' });
      return;
    }
    if (sse) {
      const type = failure.status === 504 ? 'upstream_timeout' : 'upstream_error';
      raw.end(
        `${bytes > 0 && !endsEvent(last) ? '\n\n' : ''}data: ${errorBody(failure.message, type, failure.status)}\n\n`,
      );
    } else {
      raw.destroy();
    }
    finish({ type: 'upstream_error', failure });
  });
  raw.once('close', () => {
    if (ended) return;
    // Destroying undici's body aborts the upstream request, so SGLang frees the GPU work.
    body.destroy();
    finish({ type: 'client_abort' });
  });
}

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
