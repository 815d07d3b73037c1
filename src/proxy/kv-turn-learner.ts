/**
 * A conversation's new messages (the last answer and the user's newest), their token ids learned
 * from the engine that prefilled them (issue #55) rather than tokenized: the engine's `BlockStored`
 * events carry every token of a prompt as the engine tokenized it, which the next turn repeats. A
 * watch starts at the block key the new messages' first block hangs from, follows the stored chain
 * whose tokens begin as expected, splits it at each close, and ends at the last message's close
 * followed by the generation prompt (ChatML's `<|im_end|>\n<|im_start|>assistant\n`). Where the
 * answer reasoned first and the history drops that (Qwen3), the next prefill stores the history anew
 * from the answer on; where the history keeps the answer as generated, a done watch follows the
 * engine's answer (kv-followed-answer.ts) and the next turn's watch takes the chain up after it.
 * A watch the engine never completes (evicted, events lost) costs nothing: the next turn tokenizes
 * the messages instead. Bounded: `MAX_WATCHES` at once, `MAX_ANSWERS` followed. Pure: no I/O. */

import { type ChainStart, FollowedAnswer } from './kv-followed-answer.js';
import { KeptBlocks } from './kv-kept-blocks.js';

/** Watches held at most; past it the oldest goes (its messages are tokenized instead). */
const MAX_WATCHES = 4096;
/** A chain longer than this many tokens without the end mark is given up. */
const MAX_TOKENS = 32_768;
/** Answers followed at most (kv-followed-answer.ts), the oldest given up past it. */
const MAX_ANSWERS = 1024;
const NO_STARTS: readonly ChainStart[] = [];

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

interface Watching extends WatchSpec {
  readonly done: LearnedMessages;
  /** The chain's tokens from `skip` on. */
  readonly collected: number[];
  /** Indexes of `collected` just past each close found. */
  readonly ends: number[];
  /** Chain tokens seen (`expect` is checked against them). */
  seen: number;
  /** The keys of the chain's blocks in order from its start (null: it began after blocks not its own, an answer's). */
  keys: number[] | null;
  /** Where the search for the next close resumes. */
  scanned: number;
  /** The key the chain's next block hangs from (null: not started, listed at each of `starts`). */
  parent: number | null;
  /** Once done: the engine's answer it follows. */
  answer: FollowedAnswer | null;
}

/**
 * A watch's messages' ids (each its close included), and the keys of its chain's blocks from the
 * first one after the lead's last full block, as the engine's events gave them (null when its chain
 * began inside an answer followed).
 */
export type LearnedMessages = (messages: Uint32Array[], chainKeys: readonly number[] | null) => void;

export class TurnLearner {
  readonly #close: readonly number[];
  readonly #generation: readonly number[];
  /** The token an answer that reasons opens with (`<think>`), null when the model has none. */
  readonly #thinkStart: number | null;
  readonly #byParent = new Map<number, Watching[]>();
  /** Insertion order, for the bound. */
  readonly #all = new Set<Watching>();
  /** The watch the last block went on, waiting at its `parent`: kept out of `#byParent` while its chain's blocks come. */
  #hot: Watching | null = null;
  /** Answers followed, by `Answer.at`, and the watch following each. */
  readonly #answers = new Map<number, Watching>();
  /** Blocks kept while a watch is on its way (its head tokenized in the background): it replays them. */
  readonly kept = new KeptBlocks();

  constructor(close: readonly number[], generation: readonly number[], thinkStart: number | null = null) {
    this.#close = close;
    this.#generation = generation;
    this.#thinkStart = thinkStart;
  }

  /** Watches waiting for their messages. */
  get watching(): number {
    return this.#all.size;
  }

  /** Engines' answers followed for the next turn. */
  get following(): number {
    return this.#answers.size;
  }

  /** Learns `spec.count` messages; `done` gets their ids, each with its close. */
  watch(spec: WatchSpec, done: LearnedMessages): void {
    if (this.#all.size >= MAX_WATCHES) this.#drop(this.#all.values().next().value as Watching);
    const { expect, skip, count } = spec;
    const takenUp = this.#answers.size === 0 ? NO_STARTS : this.#takeUpAnswer(spec);
    const starts = takenUp.length === 0 ? spec.starts : [...spec.starts, ...takenUp];
    const watching: Watching = {
      starts,
      expect,
      skip,
      count,
      done,
      collected: [],
      ends: [],
      seen: 0,
      keys: [],
      scanned: 0,
      parent: null,
      answer: null,
    };
    this.#all.add(watching);
    for (const start of starts) this.#listAt(start.parent).push(watching);
    if (!this.kept.empty) this.#replay(watching);
  }

  /** Feeds a new watch the kept blocks of its chain, from its starts on, as if they came now. */
  #replay(watching: Watching): void {
    let parents = watching.starts.map((start) => start.parent);
    while (parents.length > 0) {
      const from = watching.parent;
      for (const parent of parents) {
        for (const block of this.kept.children(parent)) {
          this.#deliver(parent, block.key, block.tokens, 0, block.tokens.length, watching);
          if (watching.parent !== from) break;
        }
        if (watching.parent !== from) break;
      }
      const waiting =
        this.#all.has(watching) || (watching.answer !== null && this.#answers.get(watching.answer.at) === watching);
      if (watching.parent === from || !waiting) return;
      parents = [watching.parent as number];
    }
  }

  /** A block an engine stored (kv-block-map.ts's listener). */
  stored(parent: number, key: number, tokens: readonly number[], from: number, to: number): void {
    this.kept.stored(parent, key, tokens, from, to);
    this.#deliver(parent, key, tokens, from, to, null);
  }

  /** Gives the block to the watches waiting at `parent` (`only`: to that one alone, a replay). */
  #deliver(
    parent: number,
    key: number,
    tokens: readonly number[],
    from: number,
    to: number,
    only: Watching | null,
  ): void {
    const hot = this.#hot;
    if (hot !== null && hot.parent !== parent) {
      this.#hot = null;
      this.#listAt(hot.parent as number).push(hot);
    }
    const list = this.#byParent.get(parent);
    if (hot !== null && hot.parent === parent && (only === null || only === hot)) {
      this.#hot = null;
      if (this.#continues(hot, hot.seen, tokens, from, to)) this.#advance(hot, parent, key, tokens, from, to);
      else this.#listAt(parent).push(hot);
    }
    if (list === undefined) return;
    // Most often one watch: unlisting it empties `list` as the loop ends.
    for (const watching of list.length === 1 ? list : [...list]) {
      if (only !== null && watching !== only) continue;
      const start = watching.parent === null ? watching.starts.find((s) => s.parent === parent) : undefined;
      const at = watching.parent === null ? start?.at : watching.seen;
      if (at === undefined || !this.#continues(watching, at, tokens, from, to)) continue;
      this.#unlist(watching);
      // Started further in: the tokens before this block are the expected ones (their blocks' keys
      // those of the starts before), or the answer's.
      const pre = start?.pre ?? watching.expect;
      if (start?.pre !== undefined) watching.keys = null;
      else if (start !== undefined)
        for (const earlier of watching.starts)
          if (earlier.pre === undefined && earlier.at > 0 && earlier.at <= start.at)
            watching.keys?.push(earlier.parent);
      while (watching.seen < at) this.#take(watching, pre[watching.seen]);
      this.#advance(watching, parent, key, tokens, from, to);
    }
  }

  /**
   * Where the chain may go on from an answer followed after one of the watch's starts (the history
   * keeps it as generated): after any of its blocks, the chain's tokens before that known.
   */
  #takeUpAnswer(spec: WatchSpec): ChainStart[] {
    for (const start of spec.starts) {
      const follower = this.#answers.get(start.parent);
      if (follower?.answer == null) continue;
      this.#drop(follower);
      return follower.answer.startsFor(start, spec.expect);
    }
    return [];
  }

  /** Takes the block (hanging from `parent`) into the watch; it then waits at `key`, or is done (and follows the engine's answer). */
  #advance(watching: Watching, parent: number, key: number, tokens: readonly number[], from: number, to: number): void {
    watching.parent = key;
    if (watching.answer !== null) {
      watching.answer.add(key, tokens, from, to);
      if (watching.answer.worthFollowing(this.#thinkStart)) this.#wait(watching, key);
      else this.#drop(watching);
      return;
    }
    const { collected, skip } = watching;
    watching.keys?.push(key);
    const taken = Math.max(from, from + skip - watching.seen);
    for (let i = taken; i < to; i++) collected.push(tokens[i]);
    watching.seen += to - from;
    const outcome = this.#read(watching);
    if (outcome === 'more' && watching.collected.length <= MAX_TOKENS) {
      this.#wait(watching, key);
      return;
    }
    this.#all.delete(watching);
    if (outcome !== 'done') return;
    const { ends } = watching;
    // One typed array for the messages (as the tokenizer's ids are: the readers of ids see one kind).
    const ids = new Uint32Array(ends[ends.length - 1]);
    for (let i = 0; i < ids.length; i++) ids[i] = collected[i];
    watching.done(
      ends.map((end, i) => ids.subarray(i === 0 ? 0 : ends[i - 1], end)),
      watching.keys,
    );
    this.#startFollowing(watching, parent, key, to - from);
  }

  /** A chain's blocks come one after another: the watch waits outside the map until another's come. */
  #wait(watching: Watching, key: number): void {
    if (this.#hot === null) this.#hot = watching;
    else this.#listAt(key).push(watching);
  }

  /** A watch done at a block (`key`, hanging from `previous`) follows the engine's answer, where the next turn's watch starts. */
  #startFollowing(watching: Watching, previous: number, key: number, blockSize: number): void {
    const promptEnd = watching.skip + watching.ends[watching.count - 1] + this.#generation.length;
    const { skip, collected } = watching;
    const answer = FollowedAnswer.after({ skip, collected, promptEnd }, previous, key, blockSize);
    if (answer === null || !answer.worthFollowing(this.#thinkStart)) return;
    const { at } = answer;
    const earlier =
      this.#answers.get(at) ?? (this.#answers.size >= MAX_ANSWERS ? this.#answers.values().next().value : undefined);
    if (earlier !== undefined) this.#drop(earlier);
    watching.answer = answer;
    this.#answers.set(at, watching);
    this.#wait(watching, key);
  }

  /** Whether `tokens[from..to)`, `at` tokens into the chain, go on as its expected start says. */
  #continues(watching: Watching, at: number, tokens: readonly number[], from: number, to: number): boolean {
    const { expect } = watching;
    for (let i = from; i < to && at + i - from < expect.length; i++)
      if (tokens[i] !== expect[at + i - from]) return false;
    return true;
  }

  #take(watching: Watching, token: number): void {
    if (watching.seen++ >= watching.skip) watching.collected.push(token);
  }

  /** Finds the closes collected so far: `done` once the last message's close and the generation prompt are in. */
  #read(watching: Watching): 'more' | 'done' | 'wrong' {
    const { collected, ends, count } = watching;
    const close = this.#close;
    while (ends.length < count) {
      let found = -1;
      for (let i = watching.scanned; i + close.length <= collected.length && found < 0; i++) {
        let j = 0;
        while (j < close.length && collected[i + j] === close[j]) j++;
        if (j === close.length) found = i;
      }
      if (found < 0) {
        watching.scanned = Math.max(watching.scanned, collected.length - close.length + 1);
        return 'more';
      }
      ends.push(found + close.length);
      watching.scanned = found + close.length;
    }
    const last = ends[count - 1];
    const generation = this.#generation;
    if (collected.length < last + generation.length) return 'more';
    for (let j = 0; j < generation.length; j++) if (collected[last + j] !== generation[j]) return 'wrong';
    return 'done';
  }

  #listAt(parent: number): Watching[] {
    let list = this.#byParent.get(parent);
    if (list === undefined) {
      list = [];
      this.#byParent.set(parent, list);
    }
    return list;
  }

  #unlist(watching: Watching): void {
    if (watching.parent !== null) this.#unlistAt(watching, watching.parent);
    else for (const start of watching.starts) this.#unlistAt(watching, start.parent);
  }

  #unlistAt(watching: Watching, parent: number): void {
    const list = this.#byParent.get(parent);
    if (list === undefined) return;
    if (list.length === 1 && list[0] === watching) {
      this.#byParent.delete(parent);
      return;
    }
    const index = list.indexOf(watching);
    if (index >= 0) list.splice(index, 1);
  }

  #drop(watching: Watching): void {
    if (this.#hot === watching) this.#hot = null;
    else this.#unlist(watching);
    this.#all.delete(watching);
    if (watching.answer !== null && this.#answers.get(watching.answer.at) === watching)
      this.#answers.delete(watching.answer.at);
  }
}
