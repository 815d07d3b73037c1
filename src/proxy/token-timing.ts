/**
 * The timing of generated tokens as the client receives them (docs/operations.md, "Token latency"):
 * time to first token, the gaps between content events, time per output token and output tokens
 * per request. One `TokenClock` per generation request follows the client's stream across its
 * resumes: the time to first token is observed once, each gap is observed on the backend whose
 * event ended it (after a resume, the first gap on the new backend includes the resume), and the
 * per-request figures go to the backend that ended the stream. A content event is one that carries
 * generated text as a non-empty string (the answer or its reasoning, as the API names them), read
 * with a byte search (no JSON parse).
 */
import { generationApiOf } from '../routing/openai-request.js';
import { REASONING_FIELDS } from './reasoning-fields.js';

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

/**
 * A key of generated text: its opening bytes, and the endings that may complete it up to the
 * string's opening quote (none: the opening is the whole key). One search for `"reasoning` finds
 * both names a chat stream's reasoning goes by.
 */
export interface ContentKey {
  readonly opening: Buffer;
  readonly endings: readonly Buffer[];
}

const key = (opening: string, ...endings: string[]): ContentKey => ({
  opening: Buffer.from(opening),
  endings: endings.map((ending) => Buffer.from(ending)),
});

/**
 * Where a chat stream's events carry generated text: the answer's `content` and its reasoning
 * (SGLang's `reasoning_content`, newer vLLM's `reasoning`, which may come both at once); the usage
 * counts both. A tool call's arguments are not timed.
 */
export const CHAT_CONTENT: readonly ContentKey[] = [key('"content":"'), sharedOpening(REASONING_FIELDS)];
/** One key for several names: their common opening, then each one's rest. */
function sharedOpening(names: readonly string[]): ContentKey {
  let common = names[0];
  for (const name of names) while (!name.startsWith(common)) common = common.slice(0, -1);
  return key(`"${common}`, ...names.map((name) => `${name.slice(common.length)}":"`));
}

/** ...in a completions, SGLang `/generate` or Anthropic-style messages stream's. */
const TEXT_CONTENT: readonly ContentKey[] = [key('"text":"')];
/** ...in a Responses API stream's: its `*.delta` events (its `*.done` events repeat the text). */
const RESPONSES_CONTENT: readonly ContentKey[] = [key('"delta":"')];
const QUOTE = 0x22;

/** Where a stream of the API `path` names carries its generated text. */
export function contentKeysOf(path: string): readonly ContentKey[] {
  if (generationApiOf(path) === 'chat') return CHAT_CONTENT;
  return path.startsWith('/v1/responses') ? RESPONSES_CONTENT : TEXT_CONTENT;
}

/** The longest a key can be, opening and ending. */
function longestOf(keys: readonly ContentKey[]): number {
  return Math.max(...keys.map((k) => k.opening.length + Math.max(0, ...k.endings.map((e) => e.length))));
}

/** The longest key of all the lists above. */
const LONGEST_KEY = longestOf([...CHAT_CONTENT, ...TEXT_CONTENT, ...RESPONSES_CONTENT]);

/** Where the string value of `key` found at `at` starts; -1 when no ending of it follows. */
function valueAt(chunk: Buffer, at: number, key: ContentKey): number {
  const after = at + key.opening.length;
  if (key.endings.length === 0) return after;
  for (const ending of key.endings) {
    let i = 0;
    while (i < ending.length && chunk[after + i] === ending[i]) i++;
    if (i === ending.length) return after + i;
  }
  return -1;
}

/**
 * Where the non-empty string values under the `keys` (one of the lists above) start in `chunk`, in
 * order, pushed onto `into`. A search that misses reads the whole chunk, once per key. With `seam`,
 * only the keys that start before it and whose value starts at or after it (the keys across the
 * seam between two chunks, joined), at their place less `seam`.
 */
function contentValuesIn(chunk: Buffer, keys: readonly ContentKey[], into: number[], seam = -1): number[] {
  const from = into.length;
  for (const key of keys) {
    // A chunk of one event whose line already holds a value: later keys could add no event.
    if (into.length > from && seam < 0 && chunk.indexOf(LF) >= chunk.length - 2) break;
    let at = chunk.indexOf(key.opening, seam < 0 ? 0 : Math.max(0, seam - LONGEST_KEY));
    while (at >= 0 && (seam < 0 || at < seam)) {
      const value = valueAt(chunk, at, key);
      if (value >= 0 && value >= seam && value < chunk.length && chunk[value] !== QUOTE)
        into.push(seam < 0 ? value : value - seam);
      at = chunk.indexOf(key.opening, at + key.opening.length);
    }
  }
  if (into.length - from > 1) into.sort((x, y) => x - y);
  return into;
}

/**
 * Of the content `values` in `chunk` (contentValuesIn), the events that hold any: one per line
 * (an event's JSON is one `data:` line), however many keys it has. `counted`: the line the chunk
 * begins in, begun in the chunk before, was counted there.
 */
function newEvents(chunk: Buffer, values: readonly number[], counted: boolean): number {
  let count = 0;
  let lineCounted = counted;
  let from = 0;
  for (const value of values) {
    if (lineCounted) {
      const lineEnd = chunk.indexOf(LF, from);
      lineCounted = lineEnd < 0 || lineEnd >= value;
    }
    if (!lineCounted) count++;
    lineCounted = true;
    from = value;
  }
  return count;
}

/** Content events in a chunk of whole SSE events: the events with generated text under `keys`. */
export function contentEventsIn(chunk: Buffer, keys: readonly ContentKey[]): number {
  return newEvents(chunk, contentValuesIn(chunk, keys, []), false);
}

const LF = 0x0a;
const EMPTY = Buffer.alloc(0);

export class TokenClock {
  readonly #observer: TokenObserver;
  readonly #startedAt: number;
  readonly #stream: boolean;
  readonly #keys: readonly ContentKey[];
  #series: TokenSeries | undefined;
  #firstAt: number | null = null;
  #lastAt = 0;
  #events = 0;
  /**
   * The last bytes so far when a chunk ended inside an event (an upstream read need not be a whole
   * event where no journal re-frames them): a key, or the byte after it, may be in the next chunk.
   */
  #carry: Buffer | null = null;
  /** The line the last chunk ended in, not ended yet, holds a counted value. */
  #lineCounted = false;
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
    keys: readonly ContentKey[] = CHAT_CONTENT,
  ) {
    this.#observer = observer;
    this.#keys = keys;
    this.#longestKey = longestOf(keys);
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
    this.#lineCounted = false;
  }

  /** Client bytes of a stream went out at `now`. */
  seen(chunk: Buffer, now: number): void {
    const values = contentValuesIn(chunk, this.#keys, this.#acrossTheCut(chunk));
    const events = newEvents(chunk, values, this.#lineCounted);
    // The line the chunk ends in, unended, is counted if a value came after its last line feed.
    const lastLineFeed = chunk.lastIndexOf(LF);
    if (lastLineFeed >= 0) this.#lineCounted = values.length > 0 && values[values.length - 1] > lastLineFeed;
    else if (values.length > 0) this.#lineCounted = true;
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

  /** The values of keys begun before `chunk` and ended in it (at their place in it, so at 0 or after). */
  #acrossTheCut(chunk: Buffer): number[] {
    const carry = this.#carry;
    const keep = this.#longestKey;
    // A key cannot run on past a line feed.
    if (chunk.length > 0 && chunk[chunk.length - 1] === LF) this.#carry = null;
    else if (chunk.length >= keep) this.#carry = chunk.subarray(chunk.length - keep);
    else this.#carry = Buffer.concat([carry ?? EMPTY, chunk]).subarray(-keep);
    if (carry === null) return [];
    return contentValuesIn(Buffer.concat([carry, chunk.subarray(0, keep)]), this.#keys, [], carry.length);
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
