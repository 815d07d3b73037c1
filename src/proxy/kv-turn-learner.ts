/**
 * A conversation's newest message, its token ids learned from the engine that prefilled it (issue
 * #55) rather than tokenized: a request's newest turn is tokenized only a head's worth for routing,
 * and the engine's `BlockStored` events for that prompt carry every token of it. A watch starts at
 * the block key the message's first block hangs from, follows the stored chain whose tokens begin
 * as the head does, and ends at the message's close followed by the generation prompt (ChatML's
 * `<|im_end|>\n<|im_start|>assistant\n`): the ids between are the message's, exactly as the
 * engine tokenized them, which its next turn's history repeats. A watch the engine never completes
 * (evicted, events lost) costs nothing: the next turn tokenizes the message as today. Bounded:
 * `MAX_WATCHES` at once, the oldest dropped. Pure: no clock, no I/O.
 */

/** Watches held at most; past it the oldest goes (its message is tokenized at the next turn instead). */
const MAX_WATCHES = 4096;
/** A chain longer than this many tokens without the end mark is given up. */
const MAX_TOKENS = 32_768;

interface Watching {
  /** The tokens the chain must start with: the lead's partial last block, then the head. */
  readonly expect: ArrayLike<number>;
  /** Tokens of `expect` before the message (the lead's partial block). */
  readonly skip: number;
  readonly done: (ids: Uint32Array) => void;
  readonly collected: number[];
  /** The key the chain's next block hangs from. */
  parent: number;
}

export class TurnLearner {
  /** The message's close then the generation prompt, and the close's length. */
  readonly #end: readonly number[];
  readonly #closeLength: number;
  readonly #byParent = new Map<number, Watching[]>();
  /** Insertion order, for the bound. */
  readonly #all = new Set<Watching>();

  constructor(close: readonly number[], generation: readonly number[]) {
    this.#end = [...close, ...generation];
    this.#closeLength = close.length;
  }

  get watching(): number {
    return this.#all.size;
  }

  /** Learns the message whose first block hangs from `parent`; `done` gets its ids, close included. */
  watch(parent: number, expect: ArrayLike<number>, skip: number, done: (ids: Uint32Array) => void): void {
    if (this.#all.size >= MAX_WATCHES) this.#drop(this.#all.values().next().value as Watching);
    const watching: Watching = { expect, skip, done, collected: [], parent };
    this.#all.add(watching);
    this.#listAt(parent).push(watching);
  }

  /** A block an engine stored (kv-block-map.ts's listener). */
  stored(parent: number, key: number, tokens: readonly number[], from: number, to: number): void {
    const list = this.#byParent.get(parent);
    if (list === undefined) return;
    for (const watching of [...list]) {
      if (!this.#continues(watching, tokens, from, to)) continue;
      this.#unlist(watching);
      for (let i = from; i < to; i++) watching.collected.push(tokens[i]);
      const end = this.#endIn(watching, to - from);
      if (end >= 0) {
        this.#drop(watching);
        watching.done(Uint32Array.from(watching.collected.slice(watching.skip, end + this.#closeLength)));
      } else if (watching.collected.length > MAX_TOKENS) this.#drop(watching);
      else {
        watching.parent = key;
        this.#listAt(key).push(watching);
      }
    }
  }

  /** Whether `tokens[from..to)` go on where the watch's chain is, as far as its expected head says. */
  #continues(watching: Watching, tokens: readonly number[], from: number, to: number): boolean {
    const at = watching.collected.length;
    for (let i = from; i < to && at + i - from < watching.expect.length; i++)
      if (tokens[i] !== watching.expect[at + i - from]) return false;
    return true;
  }

  /** Where the end mark starts in what the last `added` tokens could complete; -1: not yet. */
  #endIn(watching: Watching, added: number): number {
    const got = watching.collected;
    const end = this.#end;
    const first = Math.max(watching.skip, got.length - added - end.length + 1);
    for (let i = first; i + end.length <= got.length; i++) {
      let j = 0;
      while (j < end.length && got[i + j] === end[j]) j++;
      if (j === end.length) return i;
    }
    return -1;
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
    const list = this.#byParent.get(watching.parent);
    if (list === undefined) return;
    const index = list.indexOf(watching);
    if (index >= 0) list.splice(index, 1);
    if (list.length === 0) this.#byParent.delete(watching.parent);
  }

  #drop(watching: Watching): void {
    this.#unlist(watching);
    this.#all.delete(watching);
  }
}
