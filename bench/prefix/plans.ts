/** bench:prefix's three workloads at their sizes, and its servers' prefill speed (shared with model.ts). */

import { packagedQwen3Dir } from '../../src/model/chat-model.js';
import { engineOptions, SCRIPT_CONCURRENCY_PER_SLOT, SERVERS, workloadSpec } from '../balance/fleet-spec.js';
import type { SimModelOptions } from '../lib/sim-control.js';
import { groupSampling, multiTurn, type PrefixWorkload, uniquePrompts } from './workloads.js';

/**
 * Prefill speed of this bench's servers, tokens per ms. bench:balance's 100 makes a 1,000-token
 * prompt cost under 2 decode steps; on a real 7-8B model it costs about 6 (~26 tokens/ms against
 * ~6 ms a step at batch 32: jetstream-pytorch PR #68 measured Llama-2-7B prefilling 1,024 tokens in
 * 38 ms), and that ratio is what a cache hit saves, so this bench uses the real one.
 */
export const PREFIX_PREFILL_TOKENS_PER_MS = 25;
export interface WorkloadPlan {
  id: 'group' | 'multi-turn' | 'kv-multi-turn' | 'unique';
  workload: PrefixWorkload;
  /** Requests in flight, or conversations under way. */
  concurrency: number;
  kvTokens: number;
  /**
   * One-token requests sent at once before the clock starts (job.ts): the multi-turn job
   * opens with every conversation's first turn at once, which a fresh proxy would otherwise meet cold.
   */
  warmup: number;
  /** The figure its target is judged on, and the target's ratio against least-loaded (null: judged by kvChecks only). */
  headline: 'makespanSec' | 'ttftP50Ms' | 'outputTokensPerSec';
  limit: number | null;
}

/** `usersPerPrompt`: kv-multi-turn's conversations per system prompt (default: one system prompt for all). */
export function prefixPlans(quick: boolean, scale: number, seed: number, usersPerPrompt?: number): WorkloadPlan[] {
  const n = (full: number, small: number) => Math.max(1, Math.round((quick ? small : full) * scale));
  const slots = engineOptions({ quick: false }).maxRunningRequests * SERVERS;
  return [
    {
      id: 'group',
      workload: groupSampling({
        prompts: n(64, 12),
        n: 8,
        seed,
        promptChars: [3000, 6000],
        outputMedian: 60,
        maxTokens: 600,
      }),
      concurrency: SCRIPT_CONCURRENCY_PER_SLOT * slots,
      kvTokens: 100_000,
      warmup: 0,
      headline: 'makespanSec',
      limit: 0.8,
    },
    {
      id: 'multi-turn',
      workload: multiTurn({
        conversations: n(96, 20),
        minTurns: 5,
        maxTurns: 10,
        seed,
        systemChars: 1200,
        userChars: [200, 800],
        replyMedian: 60,
        maxTokens: 600,
        thinkMs: [500, 1500],
      }),
      concurrency: Math.round(slots / 2),
      kvTokens: 100_000,
      warmup: Math.min(Math.round(slots / 2), n(96, 20)),
      headline: 'ttftP50Ms',
      limit: 0.6,
    },
    {
      // Issue #55's shared-prefix multi-turn load: every conversation opens with one long system
      // prompt and grows turn by turn; short pauses, so prefill (what a cache hit saves) sets the
      // pace. The KV pools hold about a third of the conversations under way: the caches evict, and
      // where a conversation still is, is what the engines' events know and a record of sends does not.
      id: 'kv-multi-turn',
      workload: multiTurn({
        conversations: n(168, 16),
        minTurns: quick ? 2 : 4,
        maxTurns: quick ? 3 : 8,
        seed,
        systemChars: 3000,
        userChars: [300, 900],
        replyMedian: 60,
        maxTokens: 600,
        thinkMs: [200, 600],
        usersPerPrompt,
        name: 'shared-prefix multi-turn',
      }),
      concurrency: Math.round(slots / 2),
      kvTokens: 40_000,
      warmup: Math.min(Math.round(slots / 2), n(168, 16)),
      headline: 'outputTokensPerSec',
      limit: null,
    },
    {
      id: 'unique',
      workload: uniquePrompts({ ...workloadSpec({ quick }), count: n(1500, 150), seed }),
      concurrency: SCRIPT_CONCURRENCY_PER_SLOT * slots,
      kvTokens: engineOptions({ quick: false }).maxTotalNumTokens,
      warmup: 0,
      headline: 'makespanSec',
      limit: 1.02,
    },
  ];
}

/**
 * The servers of a run with the kv-aware arm, for every target alike: the tokenizer and chat template
 * fleetgate reads requests with (so both key blocks by the same token ids), a KV-event publisher on
 * any free port (found in /server_info), and no reasoning (the answers stay the workload's lengths).
 */
export function kvFleet(): SimModelOptions {
  return {
    modelPath: packagedQwen3Dir(),
    thinkTokens: [0, 0],
    kvEvents: {
      endpoint: 'tcp://127.0.0.1:0',
      topic: 'kv-events',
      replayEndpoint: null,
      bufferSteps: 10_000,
      encoding: 'array',
      dropSeqs: null,
    },
  };
}
