/**
 * The KV-event series (issue #55): events and blocks applied, gaps and how they were settled
 * (replayed, or the map marked stale), engine restarts seen in the seqs, the map's size, each
 * backend's stream state, the prompt tokens the chosen backend held per routed request, and how
 * long requests waited for the tokenizer's worker.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { KvCounters } from '../fleet/kv-events/kv-events.js';
import type { KvRouting } from '../proxy/kv-routing.js';

const COUNTERS: ReadonlyArray<[keyof KvCounters, string, string]> = [
  ['events', 'fleetgate_kv_events_total', 'KV-cache events applied from the engines.'],
  ['batches', 'fleetgate_kv_event_batches_total', 'KV-event batches (one seq each) applied.'],
  ['storedBlocks', 'fleetgate_kv_blocks_stored_total', 'Blocks recorded from BlockStored events.'],
  ['removedBlocks', 'fleetgate_kv_blocks_removed_total', 'Blocks dropped on BlockRemoved events.'],
  [
    'skippedBlocks',
    'fleetgate_kv_blocks_skipped_total',
    'Stored blocks not recorded: parent unknown, LoRA, extra keys, another tier.',
  ],
  ['gaps', 'fleetgate_kv_event_gaps_total', "Gaps in an engine stream's seqs."],
  ['replays', 'fleetgate_kv_event_replays_total', "Gaps filled from the engine's replay socket."],
  [
    'replayFailures',
    'fleetgate_kv_event_replay_failures_total',
    'Replays that could not fill a gap (the map went stale).',
  ],
  ['restarts', 'fleetgate_kv_event_restarts_total', 'Engine restarts seen as seqs back at 0 (the map dropped).'],
  ['decodeErrors', 'fleetgate_kv_event_decode_errors_total', 'Event frames that could not be decoded (dropped).'],
];

export function registerKvMetrics(register: Registry, kv: KvRouting): void {
  const counters = kv.events.counters;
  for (const [field, name, help] of COUNTERS) {
    const counter: Counter = new Counter({
      name,
      help,
      registers: [register],
      collect() {
        counter.reset();
        counter.inc(counters[field]);
      },
    });
  }
  const blocks: Gauge = new Gauge({
    name: 'fleetgate_kv_map_blocks',
    help: 'Entries (backend, block) the KV-event map holds (bounded by routing.kv_events.max_blocks).',
    registers: [register],
    collect() {
      blocks.set(kv.events.map.size);
    },
  });
  const hits = new Histogram({
    name: 'fleetgate_kv_hit_tokens',
    help: 'Prompt tokens the chosen backend held (by its KV events) per request routed by kv-aware, by decision.',
    labelNames: ['decision'] as const,
    buckets: [0, 16, 64, 256, 1024, 4096, 16384, 65536],
    registers: [register],
  });
  kv.routed = (decision, hitTokens) => hits.observe({ decision }, hitTokens);
  const waits = new Histogram({
    name: 'fleetgate_kv_tokenize_wait_seconds',
    help: "Time a request routed by kv-aware waited for the tokenizer's worker (requests with text its cache did not hold).",
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [register],
  });
  kv.waited = (seconds) => waits.observe(seconds);
  const unkeyed = new Counter({
    name: 'fleetgate_kv_unkeyed_total',
    help: 'Requests kv-aware routed without block keys: past routing.kv_events.tokenize_wait (wait), the tokenizer backlog full (busy), the worker failed (error).',
    labelNames: ['reason'] as const,
    registers: [register],
  });
  kv.unkeyed = (reason) => unkeyed.inc({ reason });
  const untokenized = new Counter({
    name: 'fleetgate_kv_untokenized_blocks_total',
    help: 'Prompt blocks kv-aware left untokenized: past what no engine could hold (routing.kv_events.tokenize_whole: false).',
    registers: [register],
  });
  kv.untokenized = (blocks) => untokenized.inc(blocks);
  const learned = new Counter({
    name: 'fleetgate_kv_learned_messages_total',
    help: "Chat messages (conversations' last answers and newest messages, first turns) whose token ids kv-aware learned from an engine's stored blocks instead of tokenizing them.",
    registers: [register],
  });
  kv.learned = (messages) => learned.inc(messages);
}
