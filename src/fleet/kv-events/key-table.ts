/**
 * A hash table from block keys (block-keys.ts: positive integers below 2^53, never 0) to values,
 * for the map's hottest lookups: a request's every block, an engine's every stored block. A `Map`
 * with such keys boxes and hashes each double (~100 ns a lookup measured here, ~35 for small
 * integers); here the keys sit unboxed in a Float64Array, probed linearly from their low 32 bits
 * (already mixed by `chainKey`), and a deletion shifts the entries after it back (no tombstones).
 * Kept at most half full. Pure.
 */

const EMPTY = 0;
const MIN_CAPACITY = 1024;

export class KeyTable<V> {
  #keys = new Float64Array(MIN_CAPACITY);
  #values: Array<V | undefined> = new Array(MIN_CAPACITY);
  #mask = MIN_CAPACITY - 1;
  #size = 0;

  get size(): number {
    return this.#size;
  }

  get(key: number): V | undefined {
    const keys = this.#keys;
    const mask = this.#mask;
    for (let slot = (key >>> 0) & mask; ; slot = (slot + 1) & mask) {
      const here = keys[slot];
      if (here === key) return this.#values[slot];
      if (here === EMPTY) return undefined;
    }
  }

  set(key: number, value: V): void {
    if (key === EMPTY) throw new RangeError('a block key is never 0');
    if (2 * (this.#size + 1) > this.#keys.length) this.#grow();
    const keys = this.#keys;
    const mask = this.#mask;
    let slot = (key >>> 0) & mask;
    while (keys[slot] !== EMPTY && keys[slot] !== key) slot = (slot + 1) & mask;
    if (keys[slot] === EMPTY) {
      keys[slot] = key;
      this.#size++;
    }
    this.#values[slot] = value;
  }

  delete(key: number): boolean {
    const keys = this.#keys;
    const mask = this.#mask;
    let slot = (key >>> 0) & mask;
    while (keys[slot] !== key) {
      if (keys[slot] === EMPTY) return false;
      slot = (slot + 1) & mask;
    }
    // Each later entry of the run whose home is not between the hole and it moves into the hole.
    let hole = slot;
    for (let next = (hole + 1) & mask; keys[next] !== EMPTY; next = (next + 1) & mask) {
      const home = (keys[next] >>> 0) & mask;
      const stays = hole <= next ? hole < home && home <= next : hole < home || home <= next;
      if (stays) continue;
      keys[hole] = keys[next];
      this.#values[hole] = this.#values[next];
      hole = next;
    }
    keys[hole] = EMPTY;
    this.#values[hole] = undefined;
    this.#size--;
    return true;
  }

  #grow(): void {
    const keys = this.#keys;
    const values = this.#values;
    this.#keys = new Float64Array(keys.length * 2);
    this.#values = new Array(keys.length * 2);
    this.#mask = keys.length * 2 - 1;
    this.#size = 0;
    for (let slot = 0; slot < keys.length; slot++) if (keys[slot] !== EMPTY) this.set(keys[slot], values[slot] as V);
  }
}
