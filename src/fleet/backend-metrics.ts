/** Parses the load figures out of a backend's Prometheus text (SGLang or vLLM names). Pure. */
import type { BackendKind } from '../config/types.js';

export interface BackendLoad {
  running: number;
  queued: number;
  tokenUsage: number | null;
  /** Counters of work done, for the progress watchdog; null when not reported. */
  generationTokens: number | null;
  promptTokens: number | null;
}

const NAMES = {
  sglang: {
    running: 'sglang:num_running_reqs',
    queued: 'sglang:num_queue_reqs',
    usage: 'sglang:token_usage',
    generation: 'sglang:generation_tokens_total',
    prompt: 'sglang:prompt_tokens_total',
  },
  vllm: {
    running: 'vllm:num_requests_running',
    queued: 'vllm:num_requests_waiting',
    usage: 'vllm:kv_cache_usage_perc',
    generation: 'vllm:generation_tokens_total',
    prompt: 'vllm:prompt_tokens_total',
  },
} as const;

/** Sums each gauge over its series (one per DP/TP rank); null when the running gauge is absent. */
export function parseBackendLoad(text: string, kind: BackendKind): BackendLoad | null {
  const names = kind === 'vllm' ? NAMES.vllm : NAMES.sglang;
  const sums = new Map<string, number>();
  const usage: number[] = [];
  for (const line of text.split('\n')) {
    if (line.length === 0 || line.charCodeAt(0) === 35 /* # */) continue;
    const nameEnd = line.search(/[{ ]/);
    if (nameEnd <= 0) continue;
    const name = line.slice(0, nameEnd);
    if (
      name !== names.running &&
      name !== names.queued &&
      name !== names.usage &&
      name !== names.generation &&
      name !== names.prompt
    )
      continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (!Number.isFinite(value)) continue;
    if (name === names.usage) usage.push(value);
    else sums.set(name, (sums.get(name) ?? 0) + value);
  }
  const running = sums.get(names.running);
  if (running === undefined) return null;
  return {
    running,
    queued: sums.get(names.queued) ?? 0,
    tokenUsage: usage.length > 0 ? Math.max(...usage) : null,
    generationTokens: sums.get(names.generation) ?? null,
    promptTokens: sums.get(names.prompt) ?? null,
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
