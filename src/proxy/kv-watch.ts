/**
 * One watch of kv-turn-learner.ts: the chain of stored blocks it reads, from where it starts to the
 * close of its last message followed by the generation prompt, the tokens and block keys it has
 * taken, and where the messages end in them. Pure.
 */
import type { ChainStart, FollowedAnswer } from './kv-followed-answer.js';

/** A chain longer than this many tokens without the end mark is given up. */
const MAX_TOKENS = 32_768;

/** Where a watch starts and what its chain must look like. */
export interface WatchSpec {
  /**
   * Where the chain's first stored block may hang from: after the lead's last full block, or further
   * into `expect` where the engine held more of it already (a prefix other prompts share).
   */
  readonly starts: readonly ChainStart[];
  /** The tokens the chain must start with: the lead's partial last block, then any head known of the messages. */
  readonly expect: ArrayLike<number>;
  /** Tokens the chain starts with that precede the messages (the lead's partial last block). */
  readonly skip: number;
  /** Messages to learn: the chain ends at the close of the last, followed by the generation prompt. */
  readonly count: number;
}

export class Watch implements WatchSpec {
  readonly starts: readonly ChainStart[];
  readonly expect: ArrayLike<number>;
  readonly skip: number;
  readonly count: number;
  /** The chain's tokens from `skip` on. */
  readonly collected: number[] = [];
  /** Indexes of `collected` just past each close found. */
  readonly ends: number[] = [];
  /** Chain tokens seen (`expect` is checked against them). */
  seen = 0;
  /** The key the chain's next block hangs from (null: not started, listed at each of `starts`). */
  parent: number | null = null;
  /** Once done: the engine's answer it follows. */
  answer: FollowedAnswer | null = null;
  readonly #done: LearnedMessages;
  /** The keys of the chain's blocks in order from its start (null: it began after blocks not its own, an answer's). */
  #keys: number[] | null = [];
  /** Where the search for the next close resumes. */
  #scanned = 0;

  constructor(spec: WatchSpec, done: LearnedMessages) {
    this.starts = spec.starts;
    this.expect = spec.expect;
    this.skip = spec.skip;
    this.count = spec.count;
    this.#done = done;
  }

  /** Whether `tokens[from..to)`, `at` tokens into the chain, go on as its expected start says. */
  continues(at: number, tokens: readonly number[], from: number, to: number): boolean {
    const { expect } = this;
    for (let i = from; i < to && at + i - from < expect.length; i++)
      if (tokens[i] !== expect[at + i - from]) return false;
    return true;
  }

  /**
   * The chain's first block comes at `start`: the tokens before it are the expected ones (their
   * blocks' keys those of the starts before), or an answer's (`pre`: their keys not known).
   */
  begin(start: ChainStart): void {
    const pre = start.pre ?? this.expect;
    if (start.pre !== undefined) this.#keys = null;
    else
      for (const earlier of this.starts)
        if (earlier.pre === undefined && earlier.at > 0 && earlier.at <= start.at) this.#keys?.push(earlier.parent);
    for (; this.seen < start.at; this.seen++) if (this.seen >= this.skip) this.collected.push(pre[this.seen]);
  }

  /**
   * Takes the chain's next block (`key`, `tokens[from..to)`): `done` once the last message's close
   * and the generation prompt are in, `wrong` when something else follows that close, or the chain
   * runs past `MAX_TOKENS`; else `more`.
   */
  take(
    key: number,
    tokens: readonly number[],
    from: number,
    to: number,
    close: readonly number[],
    generation: readonly number[],
  ): 'more' | 'done' | 'wrong' {
    const { collected } = this;
    this.#keys?.push(key);
    for (let i = Math.max(from, from + this.skip - this.seen); i < to; i++) collected.push(tokens[i]);
    this.seen += to - from;
    const outcome = this.#read(close, generation);
    return outcome === 'more' && collected.length > MAX_TOKENS ? 'wrong' : outcome;
  }

  /** Gives the messages' ids and the chain's keys to whoever asked for them. */
  finish(): void {
    const { collected, ends } = this;
    // One typed array for the messages (as the tokenizer's ids are: the readers of ids see one kind).
    const ids = new Uint32Array(ends[ends.length - 1]);
    for (let i = 0; i < ids.length; i++) ids[i] = collected[i];
    this.#done(
      ends.map((end, i) => ids.subarray(i === 0 ? 0 : ends[i - 1], end)),
      this.#keys,
    );
  }

  /** Finds the closes collected so far. */
  #read(close: readonly number[], generation: readonly number[]): 'more' | 'done' | 'wrong' {
    const { collected, ends, count } = this;
    while (ends.length < count) {
      let found = -1;
      for (let i = this.#scanned; i + close.length <= collected.length && found < 0; i++) {
        let j = 0;
        while (j < close.length && collected[i + j] === close[j]) j++;
        if (j === close.length) found = i;
      }
      if (found < 0) {
        this.#scanned = Math.max(this.#scanned, collected.length - close.length + 1);
        return 'more';
      }
      ends.push(found + close.length);
      this.#scanned = found + close.length;
    }
    const last = ends[count - 1];
    if (collected.length < last + generation.length) return 'more';
    for (let j = 0; j < generation.length; j++) if (collected[last + j] !== generation[j]) return 'wrong';
    return 'done';
  }
}

/**
 * A watch's messages' ids (each its close included), and the keys of its chain's blocks from the
 * first one after the lead's last full block, as the engine's events gave them (null when its chain
 * began inside an answer followed).
 */
export type LearnedMessages = (messages: Uint32Array[], chainKeys: readonly number[] | null) => void;
