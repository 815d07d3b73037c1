/**
 * The prompt traits with kv-aware's block keys added (kv-routing.ts): computed only while some
 * backend's KV events are live, so that a fleet without events pays no tokenizing.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { PromptTraits } from '../routing/request-traits.js';
import type { KvRouting } from './kv-routing.js';

type TraitsOf = (path: string, headers: IncomingHttpHeaders, json: unknown) => PromptTraits | undefined;

export function withKvKeys(base: TraitsOf | undefined, kv: KvRouting | null): TraitsOf | undefined {
  if (kv === null) return base;
  return (path, headers, json) => {
    const traits = base?.(path, headers, json);
    if (!kv.events.anyLive) return traits;
    const kvKeys = kv.keys(path, json);
    return kvKeys === undefined ? traits : { ...traits, kvKeys };
  };
}
