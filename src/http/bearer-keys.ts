/**
 * Bearer keys, for the data plane's API keys and the admin token alike. Keys are compared as
 * SHA-256 digests: always equal lengths, so the time taken tells nothing of a key's length
 * (`timingSafeEqual` itself needs equal lengths).
 */
import { createHash, timingSafeEqual } from 'node:crypto';

export function keyDigest(key: string): Buffer {
  return createHash('sha256').update(key).digest();
}

/** `digests` from `keyDigest`. */
export function hasValidKey(authorization: string | undefined, digests: readonly Buffer[]): boolean {
  if (!authorization?.startsWith('Bearer ')) return false;
  const given = keyDigest(authorization.slice(7));
  let valid = false;
  // Compare against every key, always, so timing does not tell which one matched.
  for (const digest of digests) {
    if (timingSafeEqual(digest, given)) valid = true;
  }
  return valid;
}
