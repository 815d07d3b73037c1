/**
 * The fleet's map of what every engine's KV cache holds, built from their events: fleetgate's block
 * keys (block-keys.ts, from the events' token ids) to the holders that store them, a holder being a
 * backend (or one DP rank of it, `backend#rank`). The engine's own hashes are kept per holder only
 * to find the key a `BlockRemoved` or a child's `parent_block_hash` names. Bounded: at most
 * `maxBlocks` (holder, block) entries in all; beyond, the least recently stored go first. A stored
 * block whose parent the map does not hold (missed, evicted here) is not recorded: no request could
 * reach it through its leading blocks. Pure: no clock, no I/O.
 */
import { chainKey, ROOT_KEY } from './block-keys.js';
import { KeyTable } from './key-table.js';
import type { EngineHash, KvEvent } from './kv-decode.js';

export interface KvApplied {
  /** Blocks recorded. */
  stored: number;
  removed: number;
  /** Stored blocks not recorded: parent unknown, or unkeyable (LoRA, extra keys, another tier). */
  skipped: number;
}

/** A block recorded: its parent's key, its own, and its tokens (`tokens[from..to)`). */
export type StoredListener = (parent: number, key: number, tokens: readonly number[], from: number, to: number) => void;

export class KvBlockMap {
  readonly #maxBlocks: number;
  /** Block key -> its holders (a holder twice when two of its engine hashes name the key). */
  readonly #holders = new KeyTable<string[]>();
  /** Per holder: engine hash -> block key; insertion order is store order. */
  readonly #byHolder = new Map<string, Map<EngineHash, number>>();
  /** Store order across holders, for eviction; entries already gone are skipped lazily. */
  #fifoHolder: string[] = [];
  #fifoHash: EngineHash[] = [];
  #fifoHead = 0;
  #size = 0;
  #onStored: StoredListener | null = null;
  /** The block stored last (forgotten at any removal): the parent of the next, most often. */
  #lastHolder = '';
  #lastHash: EngineHash | null = null;
  #lastKey = ROOT_KEY;

  constructor(maxBlocks: number) {
    this.#maxBlocks = maxBlocks;
  }

  /** Tells `listener` of every block recorded from here on (one listener). */
  onStored(listener: StoredListener): void {
    this.#onStored = listener;
  }

  /** (holder, block) entries held. */
  get size(): number {
    return this.#size;
  }

  /** Blocks held for one holder. */
  heldBy(holder: string): number {
    return this.#byHolder.get(holder)?.size ?? 0;
  }

  apply(holder: string, events: readonly KvEvent[]): KvApplied {
    const applied: KvApplied = { stored: 0, removed: 0, skipped: 0 };
    for (const event of events) {
      if (event.type === 'cleared') this.clear(holder);
      else if (event.type === 'removed') {
        if (event.unkeyable === null) applied.removed += this.#remove(holder, event.hashes);
      } else if (event.unkeyable !== null) applied.skipped += event.hashes.length;
      else {
        const added = this.#store(holder, event.hashes, event.parent, event.tokens, event.blockSize);
        applied.stored += added;
        applied.skipped += event.hashes.length - added;
      }
    }
    this.#evict();
    return applied;
  }

  /** The holder lost its cache (restart, AllBlocksCleared, ejection): every block it held is gone. */
  clear(holder: string): void {
    const own = this.#byHolder.get(holder);
    if (own === undefined) return;
    for (const key of own.values()) this.#unhold(key, holder);
    this.#size -= own.size;
    this.#byHolder.delete(holder);
  }

  /**
   * For each holder, how many of `keys` (a request's block keys, in order) it holds from the first
   * on without a gap. Holders with none are absent.
   */
  leadingRuns(keys: readonly number[]): Map<string, number> {
    const runs = new Map<string, number>();
    const first = keys.length === 0 ? undefined : this.#holders.get(keys[0]);
    if (first === undefined) return runs;
    // The holders of every key so far, narrowed in place; each one's run is recorded once, where it ends.
    const alive = first.length === 1 ? [first[0]] : [...new Set(first)];
    let count = alive.length;
    let i = 1;
    for (; i < keys.length && count > 0; i++) {
      const here = this.#holders.get(keys[i]);
      if (here === undefined) break;
      // Most often the same holders as the key before, in the same order (they stored the chain alike).
      let same = here.length >= count;
      for (let j = 0; same && j < count; j++) same = here[j] === alive[j];
      if (same) continue;
      let kept = 0;
      for (let j = 0; j < count; j++) {
        const holder = alive[j];
        if (here.length === 1 ? here[0] === holder : here.includes(holder)) alive[kept++] = holder;
        else runs.set(holder, i);
      }
      count = kept;
    }
    for (let j = 0; j < count; j++) runs.set(alive[j], i);
    return runs;
  }

  #store(
    holder: string,
    hashes: readonly EngineHash[],
    parent: EngineHash | null,
    tokens: readonly number[],
    blockSize: number,
  ): number {
    let own = this.#byHolder.get(holder);
    let parentKey = ROOT_KEY;
    if (parent !== null) {
      // A chain's blocks come one an event, each the parent of the next: the last one stored is looked up once.
      const known = this.#lastHash === parent && this.#lastHolder === holder ? this.#lastKey : own?.get(parent);
      if (known === undefined) return 0;
      parentKey = known;
    }
    if (own === undefined) {
      own = new Map();
      this.#byHolder.set(holder, own);
    }
    let added = 0;
    // vLLM may store several blocks in one event: its tokens are theirs in order, blockSize each.
    for (let i = 0; i < hashes.length && (i + 1) * blockSize <= tokens.length; i++) {
      const key = chainKey(parentKey, tokens, i * blockSize, (i + 1) * blockSize);
      this.#onStored?.(parentKey, key, tokens, i * blockSize, (i + 1) * blockSize);
      const hash = hashes[i];
      const previous = own.get(hash);
      if (previous !== undefined) {
        own.delete(hash);
        this.#unhold(previous, holder);
        this.#size--;
      }
      own.set(hash, key);
      const list = this.#holders.get(key);
      if (list === undefined) this.#holders.set(key, [holder]);
      else list.push(holder);
      this.#fifoHolder.push(holder);
      this.#fifoHash.push(hash);
      this.#size++;
      added++;
      parentKey = key;
      this.#lastHolder = holder;
      this.#lastHash = hash;
      this.#lastKey = key;
    }
    return added;
  }

  #remove(holder: string, hashes: readonly EngineHash[]): number {
    const own = this.#byHolder.get(holder);
    if (own === undefined) return 0;
    let removed = 0;
    for (const hash of hashes) {
      const key = own.get(hash);
      if (key === undefined) continue;
      own.delete(hash);
      this.#unhold(key, holder);
      this.#size--;
      removed++;
    }
    return removed;
  }

  #unhold(key: number, holder: string): void {
    this.#lastHash = null;
    const list = this.#holders.get(key);
    if (list === undefined) return;
    const at = list.indexOf(holder);
    if (at >= 0) list.splice(at, 1);
    if (list.length === 0) this.#holders.delete(key);
  }

  #evict(): void {
    while (this.#size > this.#maxBlocks && this.#fifoHead < this.#fifoHolder.length) {
      const holder = this.#fifoHolder[this.#fifoHead];
      const hash = this.#fifoHash[this.#fifoHead];
      this.#fifoHead++;
      const own = this.#byHolder.get(holder);
      const key = own?.get(hash);
      if (own === undefined || key === undefined) continue;
      own.delete(hash);
      this.#unhold(key, holder);
      this.#size--;
    }
    // The order's dead head and entries of blocks gone meanwhile: dropped once they outweigh the live.
    const length = this.#fifoHolder.length - this.#fifoHead;
    if (length > 2 * this.#size + 4096) this.#compact();
  }

  #compact(): void {
    const holders: string[] = [];
    const hashes: EngineHash[] = [];
    for (let i = this.#fifoHead; i < this.#fifoHolder.length; i++) {
      if (this.#byHolder.get(this.#fifoHolder[i])?.has(this.#fifoHash[i]) !== true) continue;
      holders.push(this.#fifoHolder[i]);
      hashes.push(this.#fifoHash[i]);
    }
    this.#fifoHolder = holders;
    this.#fifoHash = hashes;
    this.#fifoHead = 0;
  }
}
