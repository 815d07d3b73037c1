/**
 * A batch-generation job like the one fleetgate is for: chat requests whose answers are mostly
 * short with a long "thinking" tail, each stopping on its own (`<sim:len=N>` in the prompt) well
 * before `max_tokens`, so no balancer can know a request's length. Deterministic for a seed.
 */
import type { SimEngineOptions } from '../../src/sim/index.js';
import { countPromptTokens } from '../../src/sim/text-gen.js';

export interface WorkloadSpec {
  count: number;
  seed: number;
  /** `max_tokens` of every request (the balancer's only hint, far above the real lengths). */
  maxTokens: number;
  /** Share of requests in the long tail. */
  longShare: number;
  /** Median output tokens of short and of long answers (log-normal). */
  shortMedian: number;
  longMedian: number;
  /** Longest answer. */
  maxLength: number;
  /** Streamed requests, with `stream_options.include_usage`. */
  stream?: boolean;
}

export interface Job {
  index: number;
  promptTokens: number;
  outputTokens: number;
  body: Buffer;
}

/** mulberry32: small, fast, good enough for workloads. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function normal(random: () => number): number {
  const u = Math.max(random(), 1e-12);
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
}

/** The model every bench request names (the simulator serves any). */
export const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
const FILLER = 'Summarise the following passage about the history of the city and its rivers in plain words. ';

export function makeWorkload(spec: WorkloadSpec): Job[] {
  const random = rng(spec.seed);
  const jobs: Job[] = [];
  for (let index = 0; index < spec.count; index++) {
    const long = random() < spec.longShare;
    const median = long ? spec.longMedian : spec.shortMedian;
    const sigma = long ? 0.6 : 0.7;
    const length = Math.round(median * Math.exp(sigma * normal(random)));
    const outputTokens = Math.max(4, Math.min(spec.maxLength, spec.maxTokens - 1, length));
    // Prompts of 100-900 characters (about 25-225 tokens).
    const chars = 100 + Math.floor(random() * 800);
    const content = `${FILLER.repeat(Math.ceil(chars / FILLER.length)).slice(0, chars)} <sim:len=${outputTokens}> #${index}`;
    const body = Buffer.from(
      JSON.stringify({
        model: MODEL,
        messages: [{ role: 'user', content }],
        max_tokens: spec.maxTokens,
        temperature: 0.7,
        ...(spec.stream ? { stream: true, stream_options: { include_usage: true } } : {}),
      }),
    );
    // As the simulator counts a chat prompt: its text plus 4 tokens per message.
    jobs.push({ index, promptTokens: countPromptTokens(content) + 4, outputTokens, body });
  }
  return jobs;
}

export interface LowerBound {
  seconds: number;
  /** Decode and prefill work over the fleet's full-batch throughput. */
  workSeconds: number;
  /** KV-cache occupancy (token x steps) over the fleet's KV pool. */
  kvSeconds: number;
  /** The longest request alone on the fastest server. */
  longestSeconds: number;
  /** KV tokens a full batch holds on average (B x the time-weighted KV per running request). */
  kvDemandAtFullBatch: number;
  /** Whether that exceeds the pool: the KV cache, not max_running_requests, limits the batch. */
  kvPressure: boolean;
  formula: string;
}

/**
 * The makespan no balancer can beat: the largest of three bounds. Work: every server decoding a full
 * batch all the time. KV: a request holds prompt + generated tokens of KV for every step it runs, so
 * the job needs Σ(p·n + n(n+1)/2) token-steps of a pool of M tokens per server, each step lasting at
 * least τ(1). Longest: no request finishes faster than alone on the fastest server.
 */
export function lowerBound(jobs: Job[], engines: SimEngineOptions[]): LowerBound {
  let tokens = 0;
  let prompt = 0;
  let longest = 0;
  let tokenSteps = 0;
  for (const job of jobs) {
    const n = job.outputTokens;
    tokens += n;
    prompt += job.promptTokens;
    longest = Math.max(longest, n);
    tokenSteps += job.promptTokens * n + (n * (n + 1)) / 2;
  }
  const e = engines[0];
  const b = e.maxRunningRequests;
  const stepMs = e.tokenMs * (1 + e.batchPenalty * b);
  const step1Ms = e.tokenMs * (1 + e.batchPenalty);
  // Base work in ms at slowdown 1: decode steps shared by B requests, plus prefill.
  const workMs = (tokens * stepMs) / b + (e.prefillTokensPerMs > 0 ? prompt / e.prefillTokensPerMs : 0);
  const speed = engines.reduce((sum, x) => sum + 1 / x.slowdown, 0);
  const kvPerStep = engines.reduce((sum, x) => sum + x.maxTotalNumTokens / x.slowdown, 0);
  const fastest = Math.min(...engines.map((x) => x.slowdown));
  const workSeconds = workMs / speed / 1000;
  const kvSeconds = ((tokenSteps / kvPerStep) * step1Ms) / 1000;
  const longestSeconds = (longest * step1Ms * fastest) / 1000;
  const seconds = Math.max(workSeconds, kvSeconds, longestSeconds);
  // A running request holds on average Σ(p·n + n(n+1)/2) / Σn tokens of KV (weighted by its steps).
  const kvDemandAtFullBatch = (b * tokenSteps) / tokens;
  return {
    seconds,
    workSeconds,
    kvSeconds,
    longestSeconds,
    kvDemandAtFullBatch,
    kvPressure: kvDemandAtFullBatch > e.maxTotalNumTokens,
    formula:
      `LB = max(W, K, L). W = (Σn·τ(B)/B + Σp/π) / Σᵢ(1/sᵢ): decode and prefill work at full batch; ` +
      `K = Σ(p·n + n(n+1)/2) / Σᵢ(Mᵢ/sᵢ) × τ(1): KV token-steps over the pools; L = max n × τ(1): the longest answer alone. ` +
      `n = answer tokens, p = prompt tokens of a request; τ(k) = tokenMs × (1 + batchPenalty × k) is a decode step with k running; ` +
      `B = max_running_requests = ${b}; M = max_total_num_tokens = ${e.maxTotalNumTokens}; sᵢ = slowdown of server i (Σ1/sᵢ = ${speed.toFixed(3)}); ` +
      `π = ${e.prefillTokensPerMs} prefill tokens/ms. Here Σn = ${tokens}, Σp = ${prompt}, τ(B) = ${stepMs.toFixed(3)} ms: ` +
      `W = ${workSeconds.toFixed(2)} s, K = ${kvSeconds.toFixed(2)} s, L = ${longestSeconds.toFixed(2)} s. ` +
      `It ignores admission reservations, retractions and timer granularity, so no real run reaches it.`,
  };
}
