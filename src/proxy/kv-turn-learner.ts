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
import { type LearnedMessages, Watch, type WatchSpec } from './kv-watch.js';

/** Watches held at most; past it the oldest goes (its messages are tokenized instead). */
const MAX_WATCHES = 4096;
/** Answers followed at most (kv-followed-answer.ts), the oldest given up past it. */
const MAX_ANSWERS = 1024;
const NO_STARTS: readonly ChainStart[] = [];

export class TurnLearner {
  readonly #close: readonly number[];
  readonly #generation: readonly number[];
  /** The token an answer that reasons opens with (`<think>`), null when the model has none. */
  readonly #thinkStart: number | null;
  readonly #byParent = new Map<number, Watch[]>();
  /** Insertion order, for the bound. */
  readonly #all = new Set<Watch>();
  /** The watch the last block went on, waiting at its `parent`: kept out of `#byParent` while its chain's blocks come. */
  #hot: Watch | null = null;
  /** Answers followed, by `Answer.at`, and the watch following each. */
  readonly #answers = new Map<number, Watch>();
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
    if (this.#all.size >= MAX_WATCHES) this.#drop(this.#all.values().next().value as Watch);
    const { expect, skip, count } = spec;
    const takenUp = this.#answers.size === 0 ? NO_STARTS : this.#takeUpAnswer(spec);
    const starts = takenUp.length === 0 ? spec.starts : [...spec.starts, ...takenUp];
    const watching = new Watch({ starts, expect, skip, count }, done);
    this.#all.add(watching);
    for (const start of starts) this.#listAt(start.parent).push(watching);
    if (!this.kept.empty) this.#replay(watching);
  }

  /** Feeds a new watch the kept blocks of its chain, from its starts on, as if they came now. */
  #replay(watching: Watch): void {
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
  #deliver(parent: number, key: number, tokens: readonly number[], from: number, to: number, only: Watch | null): void {
    const hot = this.#hot;
    if (hot !== null && hot.parent !== parent) {
      this.#hot = null;
      this.#listAt(hot.parent as number).push(hot);
    }
    const list = this.#byParent.get(parent);
    if (hot !== null && hot.parent === parent && (only === null || only === hot)) {
      this.#hot = null;
      if (hot.continues(hot.seen, tokens, from, to)) this.#advance(hot, parent, key, tokens, from, to);
      else this.#listAt(parent).push(hot);
    }
    if (list === undefined) return;
    // Most often one watch: unlisting it empties `list` as the loop ends.
    for (const watching of list.length === 1 ? list : [...list]) {
      if (only !== null && watching !== only) continue;
      const start = watching.parent === null ? watching.starts.find((s) => s.parent === parent) : undefined;
      const at = watching.parent === null ? start?.at : watching.seen;
      if (at === undefined || !watching.continues(at, tokens, from, to)) continue;
      this.#unlist(watching);
      if (start !== undefined) watching.begin(start);
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
  #advance(watching: Watch, parent: number, key: number, tokens: readonly number[], from: number, to: number): void {
    watching.parent = key;
    if (watching.answer !== null) {
      watching.answer.add(key, tokens, from, to);
      if (watching.answer.worthFollowing(this.#thinkStart)) this.#wait(watching, key);
      else this.#drop(watching);
      return;
    }
    const outcome = watching.take(key, tokens, from, to, this.#close, this.#generation);
    if (outcome === 'more') {
      this.#wait(watching, key);
      return;
    }
    this.#all.delete(watching);
    if (outcome !== 'done') return;
    watching.finish();
    this.#startFollowing(watching, parent, key, to - from);
  }

  /** A chain's blocks come one after another: the watch waits outside the map until another's come. */
  #wait(watching: Watch, key: number): void {
    if (this.#hot === null) this.#hot = watching;
    else this.#listAt(key).push(watching);
  }

  /** A watch done at a block (`key`, hanging from `previous`) follows the engine's answer, where the next turn's watch starts. */
  #startFollowing(watching: Watch, previous: number, key: number, blockSize: number): void {
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

  #listAt(parent: number): Watch[] {
    let list = this.#byParent.get(parent);
    if (list === undefined) {
      list = [];
      this.#byParent.set(parent, list);
    }
    return list;
  }

  #unlist(watching: Watch): void {
    if (watching.parent !== null) this.#unlistAt(watching, watching.parent);
    else for (const start of watching.starts) this.#unlistAt(watching, start.parent);
  }

  #unlistAt(watching: Watch, parent: number): void {
    const list = this.#byParent.get(parent);
    if (list === undefined) return;
    if (list.length === 1 && list[0] === watching) {
      this.#byParent.delete(parent);
      return;
    }
    const index = list.indexOf(watching);
    if (index >= 0) list.splice(index, 1);
  }

  #drop(watching: Watch): void {
    if (this.#hot === watching) this.#hot = null;
    else this.#unlist(watching);
    this.#all.delete(watching);
    if (watching.answer !== null && this.#answers.get(watching.answer.at) === watching)
      this.#answers.delete(watching.answer.at);
  }
}
