/**
 * `custom_id` → input line for a whole input, held off the JS heap: the ids' UTF-8 bytes in one
 * growing buffer and an open-addressing table of (hash, offset, length, line) in typed arrays, so a
 * million ids are a few arrays for the collector rather than a million strings (the batch's peak RSS:
 * docs/benchmarks.md, bench:batch-scale). Lookups compare bytes, so a match is exact.
 */

const EMPTY = 0;

function fnv1a(bytes: Buffer, start: number, end: number): number {
  let hash = 0x811c9dc5;
  for (let i = start; i < end; i++) hash = Math.imul(hash ^ bytes[i], 0x01000193);
  // Never 0: 0 marks an empty slot.
  return hash >>> 0 || 1;
}

export class IdIndex {
  #arena = Buffer.allocUnsafe(1 << 16);
  #used = 0;
  #hashes = new Uint32Array(1 << 10);
  #offsets = new Uint32Array(1 << 10);
  #lengths = new Uint32Array(1 << 10);
  #lines = new Uint32Array(1 << 10);
  #size = 0;

  get size(): number {
    return this.#size;
  }

  /** Adds `id` on `line` (>= 1); when it is there already, adds nothing and returns its line (else 0). */
  add(id: string, line: number): number {
    const length = Buffer.byteLength(id);
    this.#reserve(length);
    const start = this.#used;
    this.#arena.write(id, start, 'utf8');
    const hash = fnv1a(this.#arena, start, start + length);
    const slot = this.#find(hash, start, length);
    if (this.#hashes[slot] !== EMPTY) return this.#lines[slot];
    this.#hashes[slot] = hash;
    this.#offsets[slot] = start;
    this.#lengths[slot] = length;
    this.#lines[slot] = line;
    this.#used += length;
    if (++this.#size * 2 > this.#hashes.length) this.#grow();
    return 0;
  }

  /** The line of `id`; 0 when it is not in the index. */
  lineOf(id: string): number {
    const length = Buffer.byteLength(id);
    this.#reserve(length);
    // Written past the ids in use as scratch space, not kept.
    this.#arena.write(id, this.#used, 'utf8');
    const slot = this.#find(fnv1a(this.#arena, this.#used, this.#used + length), this.#used, length);
    return this.#hashes[slot] === EMPTY ? 0 : this.#lines[slot];
  }

  /** Frees what it holds. */
  clear(): void {
    this.#arena = Buffer.alloc(0);
    this.#used = 0;
    this.#hashes = new Uint32Array(1);
    this.#offsets = new Uint32Array(1);
    this.#lengths = new Uint32Array(1);
    this.#lines = new Uint32Array(1);
    this.#size = 0;
  }

  /** The slot holding the id at `arena[start, start + length)`, or the empty slot where it would go. */
  #find(hash: number, start: number, length: number): number {
    const mask = this.#hashes.length - 1;
    for (let slot = hash & mask; ; slot = (slot + 1) & mask) {
      const h = this.#hashes[slot];
      if (h === EMPTY) return slot;
      if (
        h === hash &&
        this.#lengths[slot] === length &&
        this.#arena.compare(this.#arena, start, start + length, this.#offsets[slot], this.#offsets[slot] + length) === 0
      )
        return slot;
    }
  }

  #reserve(length: number): void {
    if (this.#used + length <= this.#arena.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.#arena.length * 2, this.#used + length));
    this.#arena.copy(bigger, 0, 0, this.#used);
    this.#arena = bigger;
  }

  #grow(): void {
    const old = { hashes: this.#hashes, offsets: this.#offsets, lengths: this.#lengths, lines: this.#lines };
    const capacity = old.hashes.length * 2;
    this.#hashes = new Uint32Array(capacity);
    this.#offsets = new Uint32Array(capacity);
    this.#lengths = new Uint32Array(capacity);
    this.#lines = new Uint32Array(capacity);
    const mask = capacity - 1;
    for (let i = 0; i < old.hashes.length; i++) {
      const hash = old.hashes[i];
      if (hash === EMPTY) continue;
      let slot = hash & mask;
      while (this.#hashes[slot] !== EMPTY) slot = (slot + 1) & mask;
      this.#hashes[slot] = hash;
      this.#offsets[slot] = old.offsets[i];
      this.#lengths[slot] = old.lengths[i];
      this.#lines[slot] = old.lines[i];
    }
  }
}
