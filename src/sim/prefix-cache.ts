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

/**
 * Block keys of a prompt, each with its page's token ids when the simulator publishes KV events
 * (kv-publisher.ts): `pages[i]` are block i's tokens. Without `pages` nothing is published.
 */
export type PageKeys = readonly string[] & { readonly pages?: readonly (readonly number[])[] };

/** What the cache tells a KV-event publisher: blocks stored (parent first), evicted, all cleared. */
export interface CacheObserver {
  stored(key: string, parent: string | null, tokens: readonly number[]): void;
  removed(key: string): void;
  cleared(): void;
}

export class PrefixCache {
  readonly pageSize: number;
  /** Insertion order is recency order: the first entry is evicted first. */
  readonly #blocks = new Map<string, Block>();
  #lockedBlocks = 0;

  readonly #observer: CacheObserver | null;

  constructor(pageSize: number, observer: CacheObserver | null = null) {
    this.pageSize = pageSize;
    this.#observer = observer;
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
  lock(keys: PageKeys): void {
    this.#announce(keys);
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
  insert(keys: PageKeys): void {
    this.#announce(keys);
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
      this.#observer?.removed(key);
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
    this.#observer?.cleared();
  }

  /** New blocks of `keys`, first to last (a child after its parent), to the observer. */
  #announce(keys: PageKeys): void {
    const pages = keys.pages;
    if (this.#observer === null || pages === undefined) return;
    for (let i = 0; i < keys.length && i < pages.length; i++) {
      if (!this.#blocks.has(keys[i])) this.#observer.stored(keys[i], i === 0 ? null : keys[i - 1], pages[i]);
    }
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

/**
 * Block keys of a prompt's token ids (with KV events on): one per full page, at most `maxBlocks`,
 * each hashing every token before it, with the page's tokens for the events.
 */
export function tokenPageKeys(tokens: readonly number[], pageSize: number, maxBlocks: number): PageKeys {
  const count = Math.max(0, Math.min(maxBlocks, Math.floor(tokens.length / pageSize)));
  const keys: string[] = new Array(count);
  const pages: number[][] = new Array(count);
  const hash = createHash('sha1');
  for (let i = 0; i < count; i++) {
    const page = tokens.slice(i * pageSize, (i + 1) * pageSize);
    hash.update(Uint32Array.from(page));
    keys[i] = hash.copy().digest('base64');
    pages[i] = page;
  }
  return Object.assign(keys, { pages });
}
