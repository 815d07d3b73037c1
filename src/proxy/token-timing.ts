/**
 * The timing of generated tokens as the client receives them (docs/operations.md, "Token latency"):
 * time to first token, the gaps between content events, time per output token and output tokens
 * per request. One `TokenClock` per generation request follows the client's stream across its
 * resumes: the time to first token is observed once, each gap is observed on the backend whose
 * event ended it (after a resume, the first gap on the new backend includes the resume), and the
 * per-request figures go to the backend that ended the stream. A content event is one that carries
 * generated text as a non-empty string (the answer, its reasoning or a tool call's arguments, as the
 * API names them), read with a byte search (no JSON parse).
 */
import { generationApiOf } from '../routing/openai-request.js';

/** A backend's bound series; metrics/token-metrics.ts implements it. */
export interface TokenSeries {
  firstToken(stream: boolean, seconds: number): void;
  /** `count` gaps of `seconds` each (the events of one chunk share its gap). */
  interToken(seconds: number, count: number): void;
  /** At the end of a whole answer: time per output token (streams with > 1 token) and the count. */
  finished(tokens: number, secondsPerToken: number | null): void;
}

/** Where the clock finds a backend's series. */
export interface TokenObserver {
  seriesOf(backend: string): TokenSeries | undefined;
}

const keys = (...names: string[]): readonly Buffer[] => names.map((name) => Buffer.from(`"${name}":"`));

/**
 * The keys of generated text in a chat stream's events: the answer, its reasoning (SGLang's
 * `reasoning_content`, vLLM's `reasoning`) and a tool call's arguments; the usage counts them all.
 */
export const CHAT_CONTENT = keys('content', 'reasoning_content', 'reasoning', 'arguments');
/** ...in a completions, SGLang `/generate` or Anthropic-style messages stream's. */
export const TEXT_CONTENT = keys('text');
/** ...in a Responses API stream's: its `*.delta` events (its `*.done` events repeat the text). */
export const RESPONSES_CONTENT = keys('delta');
const QUOTE = 0x22;

/** Where a stream of the API `path` names carries its generated text. */
export function contentKeysOf(path: string): readonly Buffer[] {
  if (generationApiOf(path) === 'chat') return CHAT_CONTENT;
  return path.startsWith('/v1/responses') ? RESPONSES_CONTENT : TEXT_CONTENT;
}

/**
 * Content events in a chunk of SSE events: each of the `keys` (one of the lists above) followed by
 * a byte other than its closing quote. A search that misses reads the whole chunk, once per key.
 * With `seam`, only the keys that start before it and whose following byte is at or after it (the
 * keys across the seam between two chunks, joined).
 */
export function contentEventsIn(chunk: Buffer, keys: readonly Buffer[], seam = -1): number {
  let count = 0;
  for (const key of keys) {
    let at = chunk.indexOf(key, Math.max(0, seam - key.length));
    while (at >= 0 && (seam < 0 || at < seam)) {
      const next = at + key.length;
      if (next < chunk.length && next >= seam && chunk[next] !== QUOTE) count++;
      at = chunk.indexOf(key, next);
    }
  }
  return count;
}

/** Whether `chunk` ends where an SSE event does (a blank line): no key can run on into the next. */
function endsAnEvent(chunk: Buffer): boolean {
  const n = chunk.length;
  return n >= 2 && chunk[n - 1] === LF && (chunk[n - 2] === LF || (n >= 3 && chunk[n - 3] === LF));
}
const LF = 0x0a;
const EMPTY = Buffer.alloc(0);

export class TokenClock {
  readonly #observer: TokenObserver;
  readonly #startedAt: number;
  readonly #stream: boolean;
  readonly #keys: readonly Buffer[];
  #series: TokenSeries | undefined;
  #firstAt: number | null = null;
  #lastAt = 0;
  #events = 0;
  /**
   * The last bytes so far when a chunk ended inside an event (an upstream read need not be a whole
   * event where no journal re-frames them): a key, or the byte after it, may be in the next chunk.
   */
  #carry: Buffer | null = null;
  readonly #longestKey: number;

  /**
   * `startedAt`: when the request arrived, on the clock `seen` and `finished` are given; `keys`: where
   * its events carry generated text (contentKeysOf).
   */
  constructor(
    observer: TokenObserver,
    backend: string,
    stream: boolean,
    startedAt: number,
    keys: readonly Buffer[] = CHAT_CONTENT,
  ) {
    this.#observer = observer;
    this.#keys = keys;
    this.#longestKey = Math.max(...keys.map((key) => key.length));
    this.#series = observer.seriesOf(backend);
    this.#stream = stream;
    this.#startedAt = startedAt;
  }

  /** When the first content event went out (or a non-streamed answer ended); null before. */
  get firstTokenAt(): number | null {
    return this.#firstAt;
  }

  /** Content events the client received so far. */
  get events(): number {
    return this.#events;
  }

  /** The stream continues on `backend` (a resume). */
  switchTo(backend: string): void {
    this.#series = this.#observer.seriesOf(backend);
    this.#carry = null;
  }

  /** Client bytes of a stream went out at `now`. */
  seen(chunk: Buffer, now: number): void {
    const events = contentEventsIn(chunk, this.#keys) + this.#acrossTheCut(chunk);
    if (events === 0) return;
    const series = this.#series;
    this.#events += events;
    if (this.#firstAt === null) {
      this.#firstAt = now;
      this.#lastAt = now;
      series?.firstToken(true, (now - this.#startedAt) / 1000);
      // Several events in the first chunk: the rest came with no gap.
      if (events > 1) series?.interToken(0, events - 1);
      return;
    }
    const gap = (now - this.#lastAt) / 1000 / events;
    this.#lastAt = now;
    series?.interToken(gap, events);
  }

  /** Keys begun in what came before `chunk` and ended (with the byte after them) in it. */
  #acrossTheCut(chunk: Buffer): number {
    const carry = this.#carry;
    const keep = this.#longestKey;
    if (endsAnEvent(chunk)) this.#carry = null;
    else if (chunk.length >= keep) this.#carry = chunk.subarray(chunk.length - keep);
    else this.#carry = Buffer.concat([carry ?? EMPTY, chunk]).subarray(-keep);
    if (carry === null) return 0;
    return contentEventsIn(Buffer.concat([carry, chunk.subarray(0, keep)]), this.#keys, carry.length);
  }

  /**
   * The whole answer went out at `now`; `count`: the completion tokens the client got
   * (ProxiedRequest.completionTokens), null when nothing tells. A non-streamed answer's first token
   * is its whole answer.
   */
  finished(now: number, count: number | null): void {
    const series = this.#series;
    if (series === undefined) return;
    const tokens = count ?? 0;
    if (!this.#stream) {
      if (tokens === 0) return;
      this.#firstAt = now;
      series.firstToken(false, (now - this.#startedAt) / 1000);
      series.finished(tokens, null);
      return;
    }
    // A stream with no generated text (no content event, no usage) counts no output tokens either.
    if (tokens === 0) return;
    const first = this.#firstAt;
    const perToken = first !== null && tokens > 1 ? (this.#lastAt - first) / 1000 / (tokens - 1) : null;
    series.finished(tokens, perToken);
  }
}
