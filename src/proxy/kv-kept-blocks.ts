/**
 * Blocks the engines stored lately, kept only while some watch is on its way (kv-turn-learner.ts: a
 * message whose head is tokenized in the background), so that the watch can replay its chain if the
 * engine stored it first. Bounded: `MAX_BLOCKS`, the oldest out; dropped once no watch is on its way.
 */

const MAX_BLOCKS = 4096;

export interface KeptBlock {
  readonly key: number;
  readonly tokens: number[];
}

export class KeptBlocks {
  #onTheWay = 0;
  /** By the key each hangs from, and those keys in the order stored (one per block). */
  readonly #byParent = new Map<number, KeptBlock[]>();
  readonly #order: number[] = [];

  get empty(): boolean {
    return this.#byParent.size === 0;
  }

  /** A watch is on its way: blocks are kept until the returned function says it arrived. */
  onTheWay(): () => void {
    this.#onTheWay++;
    let arrived = false;
    return () => {
      if (arrived) return;
      arrived = true;
      if (--this.#onTheWay > 0) return;
      this.#byParent.clear();
      this.#order.length = 0;
    };
  }

  /** A stored block: kept while a watch is on its way. */
  stored(parent: number, key: number, tokens: readonly number[], from: number, to: number): void {
    if (this.#onTheWay === 0) return;
    let children = this.#byParent.get(parent);
    if (children === undefined) {
      children = [];
      this.#byParent.set(parent, children);
    }
    children.push({ key, tokens: tokens.slice(from, to) });
    this.#order.push(parent);
    if (this.#order.length <= MAX_BLOCKS) return;
    const oldest = this.#order.shift() as number;
    const siblings = this.#byParent.get(oldest);
    siblings?.shift();
    if (siblings?.length === 0) this.#byParent.delete(oldest);
  }

  /** The kept blocks hanging from `parent`. */
  children(parent: number): readonly KeptBlock[] {
    return this.#byParent.get(parent) ?? [];
  }
}
