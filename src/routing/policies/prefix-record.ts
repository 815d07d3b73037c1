/**
 * fleetgate's approximate record of the prompt prefixes it sent to one backend: hashed blocks
 * (request-traits.ts), least recently sent first out. It ages like the backend's own cache: it holds
 * no more blocks than the backend's KV pool could (`capacityBlocks`, from its reported
 * `max_total_num_tokens`), never more than the memory bound, and forgets what was not sent for
 * `ttl`. Pure: the clock comes in as `now`.
 */

export interface PrefixRecordOptions {
  /** Memory bound: most blocks kept for one backend. */
  maxBlocks: number;
  /** A block not sent again within this many ms is forgotten; 0 = never by age. */
  ttlMs: number;
}

export class PrefixRecord {
  readonly #opts: PrefixRecordOptions;
  /** Block hash -> when it was last sent. Insertion order is recency order. */
  readonly #blocks = new Map<number, number>();

  constructor(opts: PrefixRecordOptions) {
    this.#opts = opts;
  }

  get size(): number {
    return this.#blocks.size;
  }

  /** How many leading blocks of `prefix` this backend was sent within the ttl. */
  match(prefix: readonly number[], now: number): number {
    const oldest = this.#opts.ttlMs > 0 ? now - this.#opts.ttlMs : Number.NEGATIVE_INFINITY;
    let matched = 0;
    for (const hash of prefix) {
      const seen = this.#blocks.get(hash);
      if (seen === undefined || seen < oldest) break;
      matched++;
    }
    return matched;
  }

  /**
   * The prefix was sent to this backend. `capacityBlocks` is how many blocks its KV cache holds
   * (null when unknown): beyond it the backend has evicted the oldest, and so does the record.
   */
  add(prefix: readonly number[], now: number, capacityBlocks: number | null): void {
    // Last block first, so that a prefix's head is the most recent and its tail is dropped first.
    for (let i = prefix.length - 1; i >= 0; i--) {
      this.#blocks.delete(prefix[i]);
      this.#blocks.set(prefix[i], now);
    }
    const limit = Math.min(this.#opts.maxBlocks, capacityBlocks ?? Number.POSITIVE_INFINITY);
    this.#trim(limit, now);
  }

  #trim(limit: number, now: number): void {
    const oldest = this.#opts.ttlMs > 0 ? now - this.#opts.ttlMs : Number.NEGATIVE_INFINITY;
    for (const [hash, seen] of this.#blocks) {
      if (this.#blocks.size <= limit && seen >= oldest) return;
      this.#blocks.delete(hash);
    }
  }
}
