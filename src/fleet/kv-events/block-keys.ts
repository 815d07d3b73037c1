/**
 * fleetgate's own block keys, computed from token ids as llm-d's precise scorer does, so that an
 * engine's hash algorithm (SGLang's SHA-256 pages, vLLM's sha256/xxhash choices, and their changes
 * between versions) never matters: key(i) = hash(key(i - 1), tokens of block i), from `ROOT_KEY`.
 * The same function keys what the engines report storing (kv-block-map.ts) and what a request's
 * prompt would find (proxy/kv-request-blocks.ts), so equal keys mean equal leading tokens. 53 bits
 * (two 32-bit lanes, as text-hash.ts's block hashes): a collision among the blocks of one fleet is
 * unlikely, and one costs a misplaced request, never a wrong answer. Pure.
 */

/** The parent of a first block. */
export const ROOT_KEY = 0;

const TWO_32 = 0x1_0000_0000;

/** murmur3's finaliser: close inputs land far apart (also routing/text-hash.ts's). */
export function mix(h: number): number {
  let x = h;
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

/** The key of the block `tokens[from..to)` whose parent block has key `parent`. */
export function chainKey(parent: number, tokens: ArrayLike<number>, from: number, to: number): number {
  let a = (parent % TWO_32) ^ 0x811c9dc5;
  let b = Math.floor(parent / TWO_32) ^ 0x5bd1e995;
  for (let i = from; i < to; i++) {
    const t = tokens[i];
    a = Math.imul(a ^ t, 0x01000193);
    b = Math.imul(b ^ (t + 0x9e3779b9), 0x01000193) ^ (b >>> 15);
  }
  const key = mix(a ^ (to - from)) * 0x200000 + (mix(b) >>> 11);
  return key === ROOT_KEY ? 1 : key;
}

/** Keys of the full blocks of `tokens` (at most `maxBlocks`), each naming the whole prefix up to it. */
export function blockKeys(
  tokens: ArrayLike<number>,
  blockSize: number,
  maxBlocks = Number.POSITIVE_INFINITY,
): number[] {
  const count = Math.min(maxBlocks, Math.floor(tokens.length / blockSize));
  const keys: number[] = new Array(count);
  let parent = ROOT_KEY;
  for (let i = 0; i < count; i++) {
    parent = chainKey(parent, tokens, i * blockSize, (i + 1) * blockSize);
    keys[i] = parent;
  }
  return keys;
}
