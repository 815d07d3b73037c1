/**
 * The engines' KV events made usable by the traffic path (issue #55): the fleet's subscriptions and
 * map (fleet/kv-events), the request's block keys from the model's tokenizer (kv-request-blocks.ts),
 * and which policy gets them: `kv-aware` and `auto` route on the map when a model is known; without
 * one they are `prefix-aware` and `least-loaded`, and the start-up line says so. Off
 * (`routing.kv_events.enabled: false`, or another policy): nothing is subscribed.
 */
import type { Config } from '../config/types.js';
import { KvEvents } from '../fleet/kv-events/kv-events.js';
import type { FleetRegistry } from '../fleet/registry.js';
import type { KvDecision } from '../routing/policies/kv-aware.js';
import { createKvKeys, type KvKeysReader } from './kv-request-blocks.js';

export interface KvRouting {
  readonly events: KvEvents;
  readonly keys: KvKeysReader;
  /** The policy's report of each pick, for the metrics (set by whoever counts them). */
  routed: (decision: KvDecision, hitTokens: number) => void;
  /** ms a request waits for its keys from the tokenizer's worker (`routing.kv_events.tokenize_wait`). */
  readonly tokenizeWaitMs: number;
  /** A request waited `seconds` for the tokenizer's worker (set by whoever counts them). */
  waited: (seconds: number) => void;
  /** A request went on without its keys, and why (set by whoever counts them). */
  unkeyed: (reason: UnkeyedReason) => void;
  /** A request's keys left this many blocks untokenized (set by whoever counts them). */
  untokenized: (blocks: number) => void;
  /** `messages` of a chat were learned from an engine's blocks (set by whoever counts them). */
  learned: (messages: number) => void;
}

/** Past `tokenize_wait`; the worker's backlog full; the worker failed. */
export type UnkeyedReason = 'wait' | 'busy' | 'error';

const ON_EVENTS: ReadonlySet<string> = new Set(['auto', 'kv-aware']);

/** Null when events are off for this config, or no model is known (`say` tells why at start-up). */
export function createKvRouting(
  config: Config,
  registry: FleetRegistry,
  say: (line: string) => void,
): KvRouting | null {
  const policy = config.routing.policy;
  const kv = config.routing.kv_events;
  if (!ON_EVENTS.has(policy)) return null;
  const fallback = policy === 'kv-aware' ? 'prefix-aware' : 'least-loaded';
  if (!kv.enabled) {
    if (policy === 'kv-aware')
      say(`routing.policy kv-aware: routing.kv_events.enabled is false; routing as ${fallback}`);
    return null;
  }
  let events: KvEvents | null = null;
  const keys = createKvKeys({
    model: config.model,
    blockSize: () => (events?.anyLive === true ? events.blockSize : null),
    cacheSize: kv.token_cache,
    tokenizeWhole: kv.tokenize_whole,
    waits: kv.tokenize_wait > 0,
    // Through `routing`, whose counters the metrics set once it exists.
    untokenized: (blocks) => routing.untokenized(blocks),
    learned: (messages) => routing.learned(messages),
    longestHeld: (blocks) => {
      let longest = 0;
      for (const run of events?.leadingRuns(blocks).values() ?? []) longest = Math.max(longest, run);
      return longest;
    },
  });
  if (keys === null) {
    if (policy === 'kv-aware')
      say(`routing.policy kv-aware: no model known (model.dir, model.dirs); routing as ${fallback}`);
    return null;
  }
  events = new KvEvents({ config: kv, registry, apiKey: config.upstream.api_key, log: say });
  events.map.onStored(keys.stored);
  const routing: KvRouting = {
    events,
    keys,
    tokenizeWaitMs: kv.tokenize_wait,
    routed: () => {},
    waited: () => {},
    unkeyed: () => {},
    untokenized: () => {},
    learned: () => {},
  };
  return routing;
}
