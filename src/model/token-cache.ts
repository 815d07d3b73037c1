/** Token ids remembered by text (proxy/kv-request-blocks.ts): a conversation's messages repeat in every turn. */

/** Token ids: a Uint32Array from the tokenizer's worker, or any array of them. */
type Ids = ArrayLike<number>;

/**
 * A message's token ids (its frame included) by content and role, least recently used out beyond
 * `size`. Keyed by the content as parsed, not the framed text: hashing a string the request already
 * holds costs less than building and hashing a new one.
 */
export class TokenCache {
  readonly #size: number;
  readonly #entries = new Map<string, { readonly role: string; readonly ids: Ids }>();

  constructor(size: number) {
    this.#size = size;
  }

  get(role: string, content: string): Ids | undefined {
    const hit = this.#entries.get(content);
    if (hit === undefined || hit.role !== role) return undefined;
    this.#entries.delete(content);
    this.#entries.set(content, hit);
    return hit.ids;
  }

  set(role: string, content: string, ids: Ids): void {
    if (this.#size === 0) return;
    this.#entries.delete(content);
    this.#entries.set(content, { role, ids });
    if (this.#entries.size > this.#size) this.#entries.delete(this.#entries.keys().next().value as string);
  }
}
