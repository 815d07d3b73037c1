/**
 * Bearer keys, for the data plane's API keys, the admin token, priority classes and rate limits
 * alike: one reader of `Authorization: Bearer <token>`, so that every part of fleetgate agrees on
 * who a client is. The scheme is matched in any case (RFC 7235 §2.1: an auth-scheme is
 * case-insensitive), so `bearer KEY` is the same client as `Bearer KEY`. Keys are compared as
 * SHA-256 digests: always equal lengths, so the time taken tells nothing of a key's length
 * (`timingSafeEqual` itself needs equal lengths).
 */
import { createHash, timingSafeEqual } from 'node:crypto';

/** The token of `Authorization: Bearer <token>` (scheme in any case), or null without one. */
export function bearerToken(authorization: string | undefined): string | null {
  const match = authorization === undefined ? null : /^bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization);
  return match === null ? null : match[1];
}

export function keyDigest(key: string): Buffer {
  return createHash('sha256').update(key).digest();
}

/** `digests` from `keyDigest`. */
export function hasValidKey(authorization: string | undefined, digests: readonly Buffer[]): boolean {
  const token = bearerToken(authorization);
  if (token === null) return false;
  const given = keyDigest(token);
  let valid = false;
  // Compare against every key, always, so timing does not tell which one matched.
  for (const digest of digests) {
    if (timingSafeEqual(digest, given)) valid = true;
  }
  return valid;
}

/**
 * The `auth.api_keys` check for a request's `Authorization` header: true when no keys are configured
 * or the header carries one of them, or, with keys configured, `alsoAccepted` (the admin token where
 * a route takes it too). Both are read per call (a reload applies at once); digests are recomputed
 * only when a value itself changes.
 */
export function apiKeyCheck(
  keys: () => readonly string[],
  alsoAccepted: () => string | null = () => null,
): (authorization: string | undefined) => boolean {
  let source: readonly string[] | null = null;
  let digests: Buffer[] = [];
  let extraSource: string | null = null;
  let withExtra: Buffer[] = [];
  return (authorization) => {
    const current = keys();
    const extra = alsoAccepted();
    if (current !== source || extra !== extraSource) {
      source = current;
      extraSource = extra;
      digests = current.map(keyDigest);
      withExtra = extra === null ? digests : [...digests, keyDigest(extra)];
    }
    return digests.length === 0 || hasValidKey(authorization, withExtra);
  };
}
