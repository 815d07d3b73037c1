/**
 * A simulated server's prefix cache, like SGLang's radix cache in pages of `pageSize` tokens. A
 * prompt is a chain of block keys (each key hashes every block before it, so a key names a whole
 * prefix). Blocks that running requests use are locked and never evicted; the others are evicted
 * least recently used first when the KV pool needs room. Pure: no clock, no I/O.
 */
import { createHash } from 'node:crypto';

interface Block {
  locks: number;
}

export class PrefixCache {
  readonly pageSize: number;
  /** Insertion order is recency order: the first entry is evicted first. */
  readonly #blocks = new Map<string, Block>();
  #lockedBlocks = 0;

  constructor(pageSize: number) {
    this.pageSize = pageSize;
  }

  /** Tokens held by cached blocks, locked or not. */
  get tokens(): number {
    return this.#blocks.size * this.pageSize;
  }

  /** Tokens held by blocks a running request uses. */
  get lockedTokens(): number {
    return this.#lockedBlocks * this.pageSize;
  }

  /** How many leading blocks of `keys` are cached, and how many of those are locked. */
  match(keys: readonly string[]): { blocks: number; locked: number } {
    let blocks = 0;
    let locked = 0;
    for (const key of keys) {
      const block = this.#blocks.get(key);
      if (block === undefined) break;
      blocks++;
      if (block.locks > 0) locked++;
    }
    return { blocks, locked };
  }

  /** A request starts using these blocks: cached ones are reused, missing ones inserted; all locked. */
  lock(keys: readonly string[]): void {
    // From the last block to the first, so a prefix's first blocks are the most recent and its
    // tail is evicted before its head (a radix cache evicts leaves first).
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i];
      const block = this.#blocks.get(key) ?? { locks: 0 };
      this.#blocks.delete(key);
      this.#blocks.set(key, block);
      if (block.locks === 0) this.#lockedBlocks++;
      block.locks++;
    }
  }

  /** Caches these blocks unlocked (a finished request's answer), most recent like a lock's. */
  insert(keys: readonly string[]): void {
    for (let i = keys.length - 1; i >= 0; i--) {
      const block = this.#blocks.get(keys[i]) ?? { locks: 0 };
      this.#blocks.delete(keys[i]);
      this.#blocks.set(keys[i], block);
    }
  }

  /** The request no longer runs; its blocks stay cached, evictable once no other request uses them. */
  unlock(keys: readonly string[]): void {
    for (const key of keys) {
      const block = this.#blocks.get(key);
      if (block === undefined || block.locks === 0) continue;
      block.locks--;
      if (block.locks === 0) this.#lockedBlocks--;
    }
  }

  /** Evicts unlocked blocks, least recently used first, until `tokens` are freed; returns the tokens freed. */
  evict(tokens: number): number {
    let freed = 0;
    for (const [key, block] of this.#blocks) {
      if (freed >= tokens) break;
      if (block.locks > 0) continue;
      this.#blocks.delete(key);
      freed += this.pageSize;
    }
    return freed;
  }

  has(key: string): boolean {
    return this.#blocks.has(key);
  }

  isLocked(key: string): boolean {
    return (this.#blocks.get(key)?.locks ?? 0) > 0;
  }

  clear(): void {
    this.#blocks.clear();
    this.#lockedBlocks = 0;
  }
}

/**
 * Block keys of a prompt's text: one per full page, at most `maxBlocks`. The simulator counts a
 * token as four characters (text-gen.ts), so a page is `4 * pageSize` characters.
 */
export function prefixKeys(text: string, pageSize: number, maxBlocks: number): string[] {
  const chars = 4 * pageSize;
  const count = Math.min(maxBlocks, Math.floor(text.length / chars));
  const keys: string[] = new Array(count);
  const hash = createHash('sha1');
  for (let i = 0; i < count; i++) {
    hash.update(text.slice(i * chars, (i + 1) * chars));
    keys[i] = hash.copy().digest('base64');
  }
  return keys;
}
