/** Token ids remembered by text (proxy/kv-request-blocks.ts): a conversation's messages repeat in every turn. */

/** Token ids: a Uint32Array from the tokenizer's worker, or any array of them. */
type Ids = ArrayLike<number>;

interface Entry {
  readonly role: string;
  readonly ids: Ids;
  /** When it last went to the back of the order (counted in moves). */
  moved: number;
}

/**
 * A message's token ids (its frame included) by content and role, least recently used out beyond
 * `size`. Keyed by the content as parsed, not the framed text: hashing a string the request already
 * holds costs less than building and hashing a new one. A hit moves its entry to the back only once
 * it is in the front half of the order (a system prompt every request repeats is not moved every
 * time): none of the front half is evicted before `size / 2` more moves, so least recently used
 * still goes first, to within half the cache.
 */
export class TokenCache {
  readonly #size: number;
  readonly #entries = new Map<string, Entry>();
  #moves = 0;

  constructor(size: number) {
    this.#size = size;
  }

  get(role: string, content: string): Ids | undefined {
    const hit = this.#entries.get(content);
    if (hit === undefined || hit.role !== role) return undefined;
    if (this.#moves - hit.moved >= this.#size / 2) {
      this.#entries.delete(content);
      this.#entries.set(content, hit);
      hit.moved = ++this.#moves;
    }
    return hit.ids;
  }

  /**
   * The ids kept for `content`: those held already (other ids of the same text, an object the
   * histories' memo knows by identity), else `ids`, kept from now on.
   */
  keep(role: string, content: string, ids: Ids): Ids {
    const held = this.get(role, content);
    if (held !== undefined) return held;
    this.set(role, content, ids);
    return ids;
  }

  set(role: string, content: string, ids: Ids): void {
    if (this.#size === 0) return;
    this.#entries.delete(content);
    this.#entries.set(content, { role, ids, moved: ++this.#moves });
    if (this.#entries.size > this.#size) this.#entries.delete(this.#entries.keys().next().value as string);
  }
}
