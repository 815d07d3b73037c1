/**
 * The text hashes routing keys requests by, pure and below both the request's description
 * (request-traits.ts: its prompt's blocks and prefix key) and the policies (rendezvous.ts: a
 * backend's score for a key).
 */

import { mix } from '../fleet/kv-events/block-keys.js';

// murmur3's finaliser, one copy for the text hashes here and the KV-event block keys.
export { mix };

/** 32-bit FNV-1a of a string, then `mix`. */
export function hashText(text: string, seed = 0x811c9dc5): number {
  let h = seed;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return mix(h);
}

/** At most this many blocks per request are hashed: longer prompts are told apart by their start already. */
const MAX_REQUEST_BLOCKS = 1024;

/**
 * Two FNV-1a hashes run over the text and are read at each block end: their 53 bits make a
 * collision between the prefixes one backend holds unlikely (an approximate record tolerates one).
 */
export function blockHashes(text: string, blockChars: number): number[] {
  const count = Math.min(MAX_REQUEST_BLOCKS, Math.floor(text.length / blockChars));
  const hashes: number[] = new Array(count);
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ 0x5bd1e995;
  for (let block = 0; block < count; block++) {
    const end = (block + 1) * blockChars;
    for (let i = block * blockChars; i < end; i++) {
      const c = text.charCodeAt(i);
      a = Math.imul(a ^ c, 0x01000193);
      b = Math.imul(b ^ c, 0x01000193) ^ (b >>> 15);
    }
    hashes[block] = (a >>> 0) * 0x200000 + (b >>> 11);
  }
  return hashes;
}
