/**
 * A conversation's new messages, their token ids learned from the engine that prefilled them (issue
 * #55) rather than tokenized: the engine's `BlockStored` events for a prompt carry every token of it,
 * exactly as the engine tokenized them, which the conversation's next turn repeats. A turn's new
 * messages are the last answer and the user's newest message. A watch starts at the block key the
 * new messages' first block hangs from, follows the stored chain whose tokens begin as expected,
 * splits it at each message's close, and ends at the last message's close followed by the
 * generation prompt (ChatML's `<|im_end|>\n<|im_start|>assistant\n`).
 *
 * Where the engine generated the answer with reasoning that the template drops from the history
 * (Qwen3's thinking), its next prefill stores the history anew from the answer on: the next turn's
 * watch starts after the prompt. Where the history keeps the answer as generated, the engine holds
 * it already and its next prefill stores from inside it: so a done watch follows the chain on
 * through the engine's answer (unless that opens with reasoning), and the next turn's watch takes
 * the chain up after any of the answer's blocks. A watch the engine never completes (evicted, events
 * lost) costs nothing: the next turn tokenizes the messages instead. Bounded: `MAX_WATCHES` at once,
 * the oldest dropped; `MAX_ANSWERS` answers followed, `MAX_ANSWER_TOKENS` each. Pure: no clock, no I/O.
 */

/** Watches held at most; past it the oldest goes (its messages are tokenized instead). */
const MAX_WATCHES = 4096;
/** A chain longer than this many tokens without the end mark is given up. */
const MAX_TOKENS = 32_768;
/** Blocks kept while a watch is on its way (its head tokenized in the background): it replays them. */
const RECENT_BLOCKS = 4096;
/** Answers followed at most, the oldest given up past it; each for this many tokens at most. */
const MAX_ANSWERS = 1024;
const MAX_ANSWER_TOKENS = 2048;

/**
 * A block key the chain's first stored block may hang from, how many tokens of the chain precede
 * that block, and which they are when not `expect`'s (an answer the engine held).
 */
interface ChainStart {
  readonly parent: number;
  readonly at: number;
  readonly pre?: ArrayLike<number>;
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

/** An engine's answer after a prompt, followed from the end of the block the prompt's last full block is. */
interface Answer {
  /** Where it is filed: that block's key. */
  readonly at: number;
  /** The chain's tokens from that block's end: the prompt's partial last block, then the answer's. */
  readonly tokens: number[];
  /** Where the answer starts in `tokens`. */
  readonly opens: number;
  /** The keys of the blocks followed, in order, and where each ends in `tokens`. */
  readonly keys: number[];
  readonly ends: number[];
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
  /** Once done: the engine's answer it follows. */
  answer: Answer | null;
}

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
  /** Watches on their way (`onTheWay`): while any is, stored blocks are kept for them to replay. */
  #onTheWay = 0;
  /** Blocks stored lately, by the key they hang from, and those keys in the order stored (one per block). */
  readonly #recent = new Map<number, Array<{ readonly key: number; readonly tokens: number[] }>>();
  readonly #recentOrder: number[] = [];

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
  watch(spec: WatchSpec, done: (messages: number[][]) => void): void {
    if (this.#all.size >= MAX_WATCHES) this.#drop(this.#all.values().next().value as Watching);
    const { expect, skip, count } = spec;
    const starts = [...spec.starts, ...this.#takeUpAnswer(spec)];
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
      answer: null,
    };
    this.#all.add(watching);
    for (const start of starts) this.#listAt(start.parent).push(watching);
    if (this.#recent.size > 0) this.#replay(watching);
  }

  /**
   * A watch will come that was asked for before its chain may be stored (its head is being
   * tokenized): blocks are kept until `arrived` is called, so that it can replay them.
   */
  onTheWay(): () => void {
    this.#onTheWay++;
    let arrived = false;
    return () => {
      if (arrived) return;
      arrived = true;
      if (--this.#onTheWay > 0) return;
      this.#recent.clear();
      this.#recentOrder.length = 0;
    };
  }

  /** Feeds a new watch the kept blocks of its chain, from its starts on, as if they came now. */
  #replay(watching: Watching): void {
    let parents = watching.starts.map((start) => start.parent);
    while (parents.length > 0) {
      const from = watching.parent;
      for (const parent of parents) {
        for (const block of this.#recent.get(parent) ?? []) {
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

  #keep(parent: number, key: number, tokens: readonly number[], from: number, to: number): void {
    let children = this.#recent.get(parent);
    if (children === undefined) {
      children = [];
      this.#recent.set(parent, children);
    }
    children.push({ key, tokens: tokens.slice(from, to) });
    this.#recentOrder.push(parent);
    if (this.#recentOrder.length <= RECENT_BLOCKS) return;
    const oldest = this.#recentOrder.shift() as number;
    const siblings = this.#recent.get(oldest);
    siblings?.shift();
    if (siblings?.length === 0) this.#recent.delete(oldest);
  }

  /** A block an engine stored (kv-block-map.ts's listener). */
  stored(parent: number, key: number, tokens: readonly number[], from: number, to: number): void {
    if (this.#onTheWay > 0) this.#keep(parent, key, tokens, from, to);
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
      // Started further in: the tokens before this block are the expected ones, or the answer's.
      const pre = start?.pre ?? watching.expect;
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
      const answer = follower.answer;
      this.#drop(follower);
      const pre = [...Array.from(spec.expect).slice(0, start.at), ...answer.tokens];
      for (let i = start.at; i < spec.expect.length; i++) if (pre[i] !== spec.expect[i]) return [];
      return answer.keys.map((parent, i) => ({ parent, at: start.at + answer.ends[i], pre }));
    }
    return [];
  }

  /** Takes the block (hanging from `parent`) into the watch; it then waits at `key`, or is done (and follows the engine's answer). */
  #advance(watching: Watching, parent: number, key: number, tokens: readonly number[], from: number, to: number): void {
    watching.parent = key;
    if (watching.answer !== null) {
      this.#follow(watching, watching.answer, key, tokens, from, to);
      return;
    }
    for (let i = from; i < to; i++) this.#take(watching, tokens[i]);
    const outcome = this.#read(watching);
    if (outcome === 'more' && watching.collected.length <= MAX_TOKENS) {
      this.#wait(watching, key);
      return;
    }
    this.#all.delete(watching);
    if (outcome !== 'done') return;
    const { collected, ends } = watching;
    watching.done(ends.map((end, i) => collected.slice(i === 0 ? 0 : ends[i - 1], end)));
    this.#startFollowing(watching, parent, key, to - from);
  }

  /** A chain's blocks come one after another: the watch waits outside the map until another's come. */
  #wait(watching: Watching, key: number): void {
    if (this.#hot === null) this.#hot = watching;
    else this.#listAt(key).push(watching);
  }

  /**
   * A watch done at a block (`key`, hanging from `previous`) follows the engine's answer, filed under
   * the key of the block the prompt's last full block is, where the next turn's watch starts.
   */
  #startFollowing(watching: Watching, previous: number, key: number, blockSize: number): void {
    const { skip, collected } = watching;
    // The chain starts at a block boundary; the prompt ends after the generation prompt.
    const promptEnd = skip + watching.ends[watching.count - 1] + this.#generation.length;
    const chainEnd = skip + collected.length;
    const boundary = Math.floor(promptEnd / blockSize) * blockSize;
    // That block is this one, or the one before; a prompt ending earlier in this block is not followed.
    const at = boundary === chainEnd ? key : boundary === chainEnd - blockSize ? previous : null;
    if (at === null || boundary < skip) return;
    const tokens = collected.slice(boundary - skip);
    const answer: Answer = { at, tokens, opens: promptEnd - boundary, keys: [], ends: [] };
    if (boundary < chainEnd) {
      answer.keys.push(key);
      answer.ends.push(tokens.length);
    }
    if (!this.#worthFollowing(answer)) return;
    const earlier =
      this.#answers.get(at) ?? (this.#answers.size >= MAX_ANSWERS ? this.#answers.values().next().value : undefined);
    if (earlier !== undefined) this.#drop(earlier);
    watching.answer = answer;
    this.#answers.set(at, watching);
    this.#wait(watching, key);
  }

  #follow(watching: Watching, answer: Answer, key: number, tokens: readonly number[], from: number, to: number): void {
    for (let i = from; i < to; i++) answer.tokens.push(tokens[i]);
    answer.keys.push(key);
    answer.ends.push(answer.tokens.length);
    if (this.#worthFollowing(answer)) this.#wait(watching, key);
    else this.#drop(watching);
  }

  /** An answer that opens with reasoning is dropped from the history (no next turn goes on from it); a long one costs too much. */
  #worthFollowing(answer: Answer): boolean {
    const { tokens, opens } = answer;
    return tokens.length <= MAX_ANSWER_TOKENS && (tokens.length <= opens || tokens[opens] !== this.#thinkStart);
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
