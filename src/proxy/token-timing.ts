/**
 * The timing of generated tokens as the client receives them (docs/operations.md, "Token latency"):
 * time to first token, the gaps between content events, time per output token and output tokens
 * per request. One `TokenClock` per generation request follows the client's stream across its
 * resumes: the time to first token is observed once, each gap is observed on the backend whose
 * event ended it (after a resume, the first gap on the new backend includes the resume), and the
 * per-request figures go to the backend that ended the stream. A content event is one whose
 * `content` or `text` is a non-empty string, read with a byte search (no JSON parse).
 */

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

/** The key of generated text in a chat stream's events. */
export const CHAT_CONTENT = Buffer.from('"content":"');
/** ...and in a completions (or SGLang `/generate`) stream's. */
export const TEXT_CONTENT = Buffer.from('"text":"');
const QUOTE = 0x22;

/**
 * Content events in a chunk of SSE events: each `key` (CHAT_CONTENT or TEXT_CONTENT) not followed by
 * its closing quote. One key per stream: a search that misses reads the whole chunk.
 */
export function contentEventsIn(chunk: Buffer, key: Buffer): number {
  let count = 0;
  let at = chunk.indexOf(key);
  while (at >= 0) {
    const next = at + key.length;
    if (next < chunk.length && chunk[next] !== QUOTE) count++;
    at = chunk.indexOf(key, next);
  }
  return count;
}

export class TokenClock {
  readonly #observer: TokenObserver;
  readonly #startedAt: number;
  readonly #stream: boolean;
  readonly #key: Buffer;
  #series: TokenSeries | undefined;
  #firstAt: number | null = null;
  #lastAt = 0;
  #events = 0;

  /**
   * `startedAt`: when the request arrived, on the clock `seen` and `finished` are given; `key`: where
   * its events carry generated text (CHAT_CONTENT, TEXT_CONTENT).
   */
  constructor(observer: TokenObserver, backend: string, stream: boolean, startedAt: number, key = CHAT_CONTENT) {
    this.#observer = observer;
    this.#key = key;
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
  }

  /** Client bytes of a stream went out at `now`. */
  seen(chunk: Buffer, now: number): void {
    const events = contentEventsIn(chunk, this.#key);
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
    const first = this.#firstAt;
    const perToken = first !== null && tokens > 1 ? (this.#lastAt - first) / 1000 / (tokens - 1) : null;
    series.finished(tokens, perToken);
  }
}
