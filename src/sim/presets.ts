/** Timing presets and defaults for simulated servers. */
import type { SimEngineOptions, SimTiming } from './types.js';

export type SimSpeed = 'fast' | 'demo' | 'realistic';
export const SIM_SPEEDS: readonly SimSpeed[] = ['fast', 'demo', 'realistic'];

export const DEFAULT_MODEL = 'meta-llama/Llama-3.1-8B-Instruct';

interface Preset {
  timing: SimTiming;
  tokenMs: number;
}

/**
 * - fast: whole start-up in ~50 ms, for tests.
 * - demo: ~20 s per server (weights ~10 s, capture ~5 s), so a status page shows every phase.
 * - realistic: minutes, like an 8B model from a network disk (weights ~3 min, capture ~80 s).
 */
const SPEED_PRESETS: Readonly<Record<SimSpeed, Preset>> = {
  fast: {
    timing: {
      startDelayMs: 0,
      shards: 4,
      shardMs: 3,
      kvMs: 3,
      graphBatches: 4,
      graphBatchMs: 3,
      httpMs: 3,
      warmupMs: 10,
      healthMs: 0,
      healthTimeoutMs: 200,
    },
    tokenMs: 1,
  },
  demo: {
    timing: {
      startDelayMs: 0,
      shards: 83,
      shardMs: 120,
      kvMs: 1500,
      graphBatches: 52,
      graphBatchMs: 100,
      httpMs: 800,
      warmupMs: 1500,
      healthMs: 50,
      healthTimeoutMs: 3000,
    },
    tokenMs: 20,
  },
  realistic: {
    timing: {
      startDelayMs: 2000,
      shards: 158,
      shardMs: 1200,
      kvMs: 6000,
      graphBatches: 52,
      graphBatchMs: 1500,
      httpMs: 2000,
      warmupMs: 2500,
      healthMs: 1000,
      healthTimeoutMs: 20_000,
    },
    tokenMs: 25,
  },
};

export function timingFor(speed: SimSpeed, overrides: Partial<SimTiming> = {}): SimTiming {
  return { ...SPEED_PRESETS[speed].timing, ...overrides };
}

export function engineFor(speed: SimSpeed, overrides: Partial<SimEngineOptions> = {}): SimEngineOptions {
  return {
    maxRunningRequests: 256,
    maxTotalNumTokens: 400_000,
    tokenMs: SPEED_PRESETS[speed].tokenMs,
    // 256 running requests make a step 1.5x slower than a single one.
    batchPenalty: 0.002,
    slowdown: 1,
    prefillTokensPerMs: 100,
    chunkedPrefillTokens: 0,
    defaultMaxTokens: 16,
    pageSize: 16,
    ...overrides,
  };
}

/** A context length for the model info and `/v1/models` (Llama 3.1). */
export const CONTEXT_LEN = 131_072;
