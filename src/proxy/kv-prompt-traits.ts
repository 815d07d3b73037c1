/**
 * The prompt traits with kv-aware's block keys added (kv-routing.ts): computed only while some
 * backend's KV events are live, so that a fleet without events pays no tokenizing. Keys that wait
 * for the tokenizer's worker make the traits a promise, settled within `routing.kv_events.tokenize_wait`:
 * past it, or when the worker is busy or failed, the request goes on without keys (the policy's
 * fallback routes it), while the worker still fills the cache for the requests after it.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { TokenizerBusy } from '../model/background-tokenizer.js';
import type { PromptTraits } from '../routing/request-traits.js';
import type { KvRouting, UnkeyedReason } from './kv-routing.js';

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
    if (kv.tokenizeWaitMs === 0) {
      // The worker still fills the cache for the requests after this one.
      kvKeys.catch(() => {});
      kv.unkeyed('wait');
      return traits;
    }
    return withinWait(kv, kvKeys).then((keys) => (keys === undefined ? traits : { ...traits, kvKeys: keys }));
  };
}

/** `keys`, or undefined once `tokenize_wait` has passed or the worker could not tokenize; counted either way. */
function withinWait(
  kv: KvRouting,
  keys: Promise<readonly number[] | undefined>,
): Promise<readonly number[] | undefined> {
  const started = performance.now();
  return new Promise((resolve) => {
    let done = false;
    const finish = (value: readonly number[] | undefined, unkeyed: UnkeyedReason | null) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      kv.waited((performance.now() - started) / 1000);
      if (unkeyed !== null) kv.unkeyed(unkeyed);
      resolve(value);
    };
    const timer = setTimeout(() => finish(undefined, 'wait'), kv.tokenizeWaitMs);
    keys.then(
      (value) => finish(value, null),
      (err) => finish(undefined, err instanceof TokenizerBusy ? 'busy' : 'error'),
    );
  });
}
