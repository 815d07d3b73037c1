/**
 * A conversation's new messages, their token ids learned from the engine that prefilled them (issue
 * #55) rather than tokenized: the engine's `BlockStored` events for a prompt carry every token of it,
 * exactly as the engine tokenized them, which the conversation's next turn repeats. A turn's new
 * messages are the last answer (as the history renders it: the engine generated it with its
 * reasoning, which the template drops, so the engine's prefill stores it anew) and the user's newest
 * message. A watch starts at the block key the new messages' first block hangs from, follows the
 * stored chain whose tokens begin as expected, splits it at each message's close, and ends at the
 * last message's close followed by the generation prompt (ChatML's `<|im_end|>\n<|im_start|>assistant\n`).
 * A watch the engine never completes (evicted, events lost, an engine that held the chain already)
 * costs nothing: the next turn tokenizes the messages instead. Bounded: `MAX_WATCHES` at once, the
 * oldest dropped. Pure: no clock, no I/O.
 */

/** Watches held at most; past it the oldest goes (its messages are tokenized at the next turn instead). */
const MAX_WATCHES = 4096;
/** A chain longer than this many tokens without the end mark is given up. */
const MAX_TOKENS = 32_768;

/** A block key the chain's first stored block may hang from, and how many of `expect`'s tokens precede that block. */
interface ChainStart {
  readonly parent: number;
  readonly at: number;
}

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
  /** The messages' ids, each its close included. */
  readonly done: (messages: number[][]) => void;
  /** The chain's tokens from `skip` on. */
  readonly collected: number[];
  /** Indexes of `collected` just past each close found. */
  readonly ends: number[];
  /** Chain tokens seen (`expect` is checked against them). */
  seen: number;
  /** Where the search for the next close resumes. */
  scanned: number;
  /** The key the chain's next block hangs from (null: not started, listed at each of `starts`). */
  parent: number | null;
}

export class TurnLearner {
  readonly #close: readonly number[];
  readonly #generation: readonly number[];
  readonly #byParent = new Map<number, Watching[]>();
  /** Insertion order, for the bound. */
  readonly #all = new Set<Watching>();
  /** The watch the last block went on, waiting at its `parent`: kept out of `#byParent` while its chain's blocks come. */
  #hot: Watching | null = null;

  constructor(close: readonly number[], generation: readonly number[]) {
    this.#close = close;
    this.#generation = generation;
  }

  get watching(): number {
    return this.#all.size;
  }

  /** Learns `spec.count` messages; `done` gets their ids, each with its close. */
  watch(spec: WatchSpec, done: (messages: number[][]) => void): void {
    if (this.#all.size >= MAX_WATCHES) this.#drop(this.#all.values().next().value as Watching);
    const { starts, expect, skip, count } = spec;
    const watching: Watching = {
      starts,
      expect,
      skip,
      count,
      done,
      collected: [],
      ends: [],
      seen: 0,
      scanned: 0,
      parent: null,
    };
    this.#all.add(watching);
    for (const start of spec.starts) this.#listAt(start.parent).push(watching);
  }

  /** A block an engine stored (kv-block-map.ts's listener). */
  stored(parent: number, key: number, tokens: readonly number[], from: number, to: number): void {
    const hot = this.#hot;
    if (hot !== null && hot.parent !== parent) {
      this.#hot = null;
      this.#listAt(hot.parent as number).push(hot);
    }
    const list = this.#byParent.get(parent);
    if (hot !== null && hot.parent === parent) {
      this.#hot = null;
      if (this.#continues(hot, hot.seen, tokens, from, to)) this.#advance(hot, hot.seen, key, tokens, from, to);
      else this.#listAt(parent).push(hot);
    }
    if (list === undefined) return;
    // Most often one watch: unlisting it empties `list` as the loop ends.
    for (const watching of list.length === 1 ? list : [...list]) {
      const at =
        watching.parent === null ? watching.starts.find((start) => start.parent === parent)?.at : watching.seen;
      if (at === undefined || !this.#continues(watching, at, tokens, from, to)) continue;
      this.#unlist(watching);
      this.#advance(watching, at, key, tokens, from, to);
    }
  }

  /** Takes the block into the watch (`at` tokens into its chain); it then waits at `key`, or is done. */
  #advance(watching: Watching, at: number, key: number, tokens: readonly number[], from: number, to: number): void {
    // Started further into `expect`: the tokens before this block are the expected ones.
    while (watching.seen < at) this.#take(watching, watching.expect[watching.seen]);
    for (let i = from; i < to; i++) this.#take(watching, tokens[i]);
    const outcome = this.#read(watching);
    watching.parent = key;
    if (outcome === 'more' && watching.collected.length <= MAX_TOKENS) {
      // A chain's blocks come one after another: the watch waits outside the map until another's come.
      if (this.#hot === null) this.#hot = watching;
      else this.#listAt(key).push(watching);
      return;
    }
    this.#all.delete(watching);
    if (outcome === 'done') {
      const { collected, ends } = watching;
      watching.done(ends.map((end, i) => collected.slice(i === 0 ? 0 : ends[i - 1], end)));
    }
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
  }
}
