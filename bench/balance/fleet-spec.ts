/** The balance bench's fleet and job, shared by the real bench (run.ts) and its virtual-time model. */
import type { SimEngineOptions } from '../../src/sim/index.js';
import type { WorkloadSpec } from './workload.js';

export const SERVERS = 7;
export const SLOW_INDEX = 6;
export const SLOWDOWN = 1.3;
/**
 * The job's client keeps 4x the fleet's batch slots in flight, as a script pushing a large job does
 * to keep every GPU busy (SGLang's and vLLM's serving benchmarks send every request at once unless
 * told otherwise). At exactly the slots, a least-connections balancer already refills each freed
 * slot at once and every such balancer ties (bench/README, "virtual-time model").
 */
export const SCRIPT_CONCURRENCY_PER_SLOT = 4;

export interface JobSizes {
  quick: boolean;
  requests?: number;
  seed?: number;
  maxRunning?: number;
  maxTokens?: number;
  kvTokens?: number;
  tokenMs?: number;
  /** Streamed requests (`--stream`). */
  stream?: boolean;
}

export function workloadSpec(s: JobSizes): WorkloadSpec {
  return {
    count: s.requests ?? (s.quick ? 150 : 3000),
    seed: s.seed ?? 7,
    maxTokens: s.maxTokens ?? (s.quick ? 2048 : 1400),
    longShare: 0.3,
    shortMedian: s.quick ? 30 : 40,
    longMedian: s.quick ? 150 : 400,
    maxLength: s.quick ? 400 : 1300,
    stream: s.stream,
  };
}

export function engineOptions(s: JobSizes): SimEngineOptions {
  return {
    tokenMs: s.tokenMs ?? (s.quick ? 1 : 6),
    maxRunningRequests: s.maxRunning ?? (s.quick ? 8 : 32),
    maxTotalNumTokens: s.kvTokens ?? (s.quick ? 3000 : 10_000),
    batchPenalty: 0.002,
    slowdown: 1,
    prefillTokensPerMs: 100,
    chunkedPrefillTokens: 0,
    defaultMaxTokens: 16,
    pageSize: 16,
  };
}

/** Server i's engine: the shared options, gpu6 1.3x slower. */
export function engineFor(engine: SimEngineOptions, i: number): SimEngineOptions {
  return { ...engine, slowdown: i === SLOW_INDEX ? SLOWDOWN : 1 };
}
