/** Parses the load figures out of a backend's Prometheus text (SGLang or vLLM names). Pure. */
import type { BackendKind } from '../config/types.js';

export interface BackendLoad {
  running: number;
  queued: number;
  tokenUsage: number | null;
  /** Counters of work done (the serving view's tokens/s, the progress watchdog); null when not reported. */
  generationTokens: number | null;
  promptTokens: number | null;
  /** KV pool in tokens, summed over ranks; null when not reported. */
  kvTokens: number | null;
  /** Prefix cache hit rate 0..1 (mean over ranks); null when not reported. */
  cacheHitRate: number | null;
}

const NAMES = {
  sglang: {
    running: 'sglang:num_running_reqs',
    queued: 'sglang:num_queue_reqs',
    usage: 'sglang:token_usage',
    generated: 'sglang:generation_tokens_total',
    prompt: 'sglang:prompt_tokens_total',
    kv: 'sglang:max_total_num_tokens',
    hitRate: 'sglang:cache_hit_rate',
  },
  vllm: {
    running: 'vllm:num_requests_running',
    queued: 'vllm:num_requests_waiting',
    usage: 'vllm:kv_cache_usage_perc',
    generated: 'vllm:generation_tokens_total',
    prompt: 'vllm:prompt_tokens_total',
    kv: null,
    hitRate: null,
  },
} as const;

/** Sums each gauge over its series (one per DP/TP rank); null when the running gauge is absent. */
export function parseBackendLoad(text: string, kind: BackendKind): BackendLoad | null {
  const names = kind === 'vllm' ? NAMES.vllm : NAMES.sglang;
  const sums = new Map<string, number>();
  const usage: number[] = [];
  const hitRates: number[] = [];
  for (const line of text.split('\n')) {
    if (line.length === 0 || line.charCodeAt(0) === 35 /* # */) continue;
    const nameEnd = line.search(/[{ ]/);
    if (nameEnd <= 0) continue;
    const name = line.slice(0, nameEnd);
    if (
      name !== names.running &&
      name !== names.queued &&
      name !== names.usage &&
      name !== names.generated &&
      name !== names.prompt &&
      name !== names.kv &&
      name !== names.hitRate
    )
      continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (!Number.isFinite(value)) continue;
    if (name === names.usage) usage.push(value);
    else if (name === names.hitRate) hitRates.push(value);
    else sums.set(name, (sums.get(name) ?? 0) + value);
  }
  const running = sums.get(names.running);
  if (running === undefined) return null;
  return {
    running,
    queued: sums.get(names.queued) ?? 0,
    tokenUsage: usage.length > 0 ? Math.max(...usage) : null,
    generationTokens: sums.get(names.generated) ?? null,
    promptTokens: sums.get(names.prompt) ?? null,
    kvTokens: names.kv === null ? null : (sums.get(names.kv) ?? null),
    cacheHitRate: hitRates.length > 0 ? hitRates.reduce((a, b) => a + b, 0) / hitRates.length : null,
  };
}

/**
 * The concurrency limit SGLang reports in `/server_info`: per DP rank
 * `effective_max_running_requests_per_dp` in `internal_states` (reference 1.4), else the
 * `max_running_requests` server argument.
 */
export function parseMaxRunning(serverInfo: string): number | null {
  try {
    const info = JSON.parse(serverInfo) as {
      max_running_requests?: unknown;
      internal_states?: Array<{ effective_max_running_requests_per_dp?: unknown }>;
    };
    const perRank = (info.internal_states ?? [])
      .map((state) => state.effective_max_running_requests_per_dp)
      .filter((value): value is number => typeof value === 'number' && value > 0);
    if (perRank.length > 0) return perRank.reduce((a, b) => a + b, 0);
    return typeof info.max_running_requests === 'number' && info.max_running_requests > 0
      ? info.max_running_requests
      : null;
  } catch {
    return null;
  }
}
