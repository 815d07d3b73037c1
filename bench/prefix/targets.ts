/**
 * bench:prefix's targets and the ids its `--targets` takes, in the same order. `kv` (issue #55) is
 * kv-aware over the engines' KV events, reading requests with the model the simulators load: a run
 * with it gives every target's servers that model and a KV-event publisher (run.ts).
 */
import { packagedQwen3Dir } from '../../src/model/chat-model.js';
import type { TargetSpec } from '../lib/targets.js';

export const PREFIX_TARGETS: readonly TargetSpec[] = [
  { name: 'fleetgate prefix-aware', kind: 'fleetgate', balance: 'prefix-aware' },
  { name: 'fleetgate least-loaded', kind: 'fleetgate', balance: 'least-loaded' },
  { name: 'nginx least_conn', kind: 'nginx', balance: 'least_conn' },
  { name: 'haproxy leastconn', kind: 'haproxy', balance: 'leastconn' },
  { name: 'haproxy hdr(X-Session-Id) consistent', kind: 'haproxy', balance: 'hdr(X-Session-Id)' },
  {
    name: 'fleetgate kv-aware',
    kind: 'fleetgate',
    balance: 'kv-aware',
    extraYaml: `model:\n  dir: ${JSON.stringify(packagedQwen3Dir())}\n`,
    // As shipped: /readyz waits for its tokenizer to load (~1 s), which the others do not have to.
    warmUp: true,
  },
  {
    name: 'fleetgate kv-aware, tokenize_wait 0',
    kind: 'fleetgate',
    balance: 'kv-aware',
    extraYaml: `model:\n  dir: ${JSON.stringify(packagedQwen3Dir())}\n`,
    warmUp: true,
    kvTokenizeWait: '0ms',
  },
];
export const TARGET_IDS = ['prefix', 'least', 'nginx', 'haproxy', 'affinity', 'kv', 'kv-nowait'] as const;
/** Targets run by default: the `kv` ones change the servers (a real tokenizer and events), so they are asked for by name. */
export const DEFAULT_TARGET_IDS = TARGET_IDS.filter((id) => !id.startsWith('kv'));
export const KV_TARGET = 'kv';
