/**
 * The timing of generated tokens as the client receives them (docs/operations.md, "Token latency"):
 * time to first token, the gaps between content events, time per output token and output tokens
 * per request. One `TokenClock` per generation request follows the client's stream across its
 * resumes: the time to first token is observed once, each gap is observed on the backend whose
 * event ended it (after a resume, the first gap on the new backend includes the resume), and the
 * per-request figures go to the backend that ended the stream. A content event is one that carries
 * generated text (the answer or its reasoning, as the API names them): the stream's one reader
 * (stream-journal.ts) counts them as it reads the events, and the relay hands the count here with
 * the bytes that carried them. The time to first token counts the first content event of either kind,
 * reasoning or answer (as SGLang's router does since its PR 29251); for thinking mode the clock
 * also observes the time to the first answer event (the reader tells it, with the bytes, once the
 * answer has begun) and, at the end, the request's reasoning tokens (the reader's figure, handed
 * over once by the relay; none for an answer without reasoning).
 */

/**
 * A backend's bound series; metrics/token-metrics.ts implements it.
 */
export interface TokenSeries {
  firstToken(stream: boolean, seconds: number): void;
  /** A stream's first answer (not reasoning) event, `seconds` after the request arrived. */
  firstAnswer(seconds: number): void;
  /** `count` gaps of `seconds` each (the events of one chunk share its gap). */
  interToken(seconds: number, count: number): void;
  /** At the end of a whole answer: time per output token (streams with > 1 token) and the count. */
  finished(tokens: number, secondsPerToken: number | null): void;
  /** At the end of a whole answer that reasoned: its reasoning tokens (> 0). */
  reasoned(tokens: number): void;
}

/** Where the clock finds a backend's series. */
export interface TokenObserver {
  seriesOf(backend: string): TokenSeries | undefined;
}

export class TokenClock {
  readonly #observer: TokenObserver;
  readonly #startedAt: number;
  readonly #stream: boolean;
  #series: TokenSeries | undefined;
  #firstAt: number | null = null;
  #answerAt: number | null = null;
  #lastAt = 0;
  #events = 0;
  #reasoning = 0;

  /** `startedAt`: when the request arrived, on the clock `seen` and `finished` are given. */
  constructor(observer: TokenObserver, backend: string, stream: boolean, startedAt: number) {
    this.#observer = observer;
    this.#series = observer.seriesOf(backend);
    this.#stream = stream;
    this.#startedAt = startedAt;
  }

  /** When the first content event went out (or a non-streamed answer ended); null before. */
  get firstTokenAt(): number | null {
    return this.#firstAt;
  }

  /** When the first answer (not reasoning) event of a stream went out; null before. */
  get firstAnswerAt(): number | null {
    return this.#answerAt;
  }

  /** Content events the client received so far. */
  get events(): number {
    return this.#events;
  }

  /** The stream continues on `backend` (a resume). */
  switchTo(backend: string): void {
    this.#series = this.#observer.seriesOf(backend);
  }

  /**
   * Client bytes of a stream holding `events` content events (at least one) went out at `now`;
   * `answered`: the answer (not reasoning) has begun, in these bytes or before.
   */
  seen(events: number, now: number, answered = false): void {
    const series = this.#series;
    this.#events += events;
    if (this.#firstAt === null) {
      this.#firstAt = now;
      series?.firstToken(true, (now - this.#startedAt) / 1000);
      // Several events in the first chunk: the rest came with no gap.
      if (events > 1) series?.interToken(0, events - 1);
    } else {
      const gap = (now - this.#lastAt) / 1000 / events;
      series?.interToken(gap, events);
    }
    this.#lastAt = now;
    if (answered && this.#answerAt === null) {
      this.#answerAt = now;
      series?.firstAnswer((now - this.#startedAt) / 1000);
    }
  }

  /**
   * The answer's reasoning tokens (the stream's reader's figure, else its `usage`'s), told once when
   * its bytes end, before `finished`; 0 or null: it did not reason.
   */
  reasoned(tokens: number | null): void {
    this.#reasoning = tokens ?? 0;
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
    } else {
      // A stream with no generated text (no content event, no usage) counts no output tokens either.
      if (tokens === 0) return;
      const first = this.#firstAt;
      const perToken = first !== null && tokens > 1 ? (this.#lastAt - first) / 1000 / (tokens - 1) : null;
      series.finished(tokens, perToken);
    }
    if (this.#reasoning > 0) series.reasoned(this.#reasoning);
  }
}
