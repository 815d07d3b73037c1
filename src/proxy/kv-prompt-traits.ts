/**
 * The prompt traits with kv-aware's block keys added (kv-routing.ts): computed only while some
 * backend's KV events are live, so that a fleet without events pays no tokenizing. Keys that wait
 * for the tokenizer's worker make the traits a promise; a worker that fails leaves the request
 * without keys (the policy's fallback routes it).
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { PromptTraits } from '../routing/request-traits.js';
import type { KvRouting } from './kv-routing.js';

type TraitsOf = (path: string, headers: IncomingHttpHeaders, json: unknown) => PromptTraits | undefined;

/** Traits now, or once the request's tokens are known. */
export type PendingTraits = PromptTraits | Promise<PromptTraits | undefined> | undefined;

export function withKvKeys(
  base: TraitsOf | undefined,
  kv: KvRouting | null,
): ((path: string, headers: IncomingHttpHeaders, json: unknown) => PendingTraits) | undefined {
  if (kv === null) return base;
  return (path, headers, json) => {
    const traits = base?.(path, headers, json);
    if (!kv.events.anyLive) return traits;
    const kvKeys = kv.keys(path, json);
    if (kvKeys === undefined) return traits;
    if (!('then' in kvKeys)) return { ...traits, kvKeys };
    const started = performance.now();
    const waited = () => kv.waited((performance.now() - started) / 1000);
    return kvKeys.then(
      (keys) => {
        waited();
        return keys === undefined ? traits : { ...traits, kvKeys: keys };
      },
      () => {
        waited();
        return traits;
      },
    );
  };
}
