/** Bodies of the info endpoints (ref 1.4) and the Prometheus text (ref 4, vLLM ref 6). */
import type { EngineStats } from './engine.js';
import type { SimEngineOptions } from './types.js';

export interface InfoContext {
  model: string;
  host: string;
  port: number;
  kind: 'sglang' | 'vllm';
  version: 'new' | 'old';
  engine: SimEngineOptions;
  contextLen: number;
  enableMetrics: boolean;
  /** Unix seconds the process started. */
  startedAt: number;
  /** The KV-event publisher once bound (`--kv-events-config`). */
  kvEvents?: { readonly endpoint: string; readonly port: number; readonly topic: string } | null;
}

/**
 * SGLang's `/server_info` `kv_events` descriptor (sgl-project/sglang#25844): where to subscribe
 * (host `*` = the server's own; port = base + DP rank), the topic and the page size subscribers key
 * blocks at; null when no publisher is configured. Also the raw `kv_events_config` and `page_size`,
 * as every ServerArgs field is there.
 */
function kvEventsFields(c: InfoContext): Record<string, unknown> {
  const kv = c.kvEvents ?? null;
  return {
    page_size: c.engine.pageSize,
    kv_events_config: kv === null ? null : JSON.stringify({ publisher: 'zmq', endpoint: kv.endpoint, topic: kv.topic }),
    kv_events:
      kv === null
        ? null
        : {
            publisher: 'zmq',
            endpoint_host: '*',
            endpoint_port_base: kv.port,
            topic: kv.topic,
            block_size: c.engine.pageSize,
            dp_size: 1,
          },
  };
}

const SGLANG_VERSION = { new: '0.5.9', old: '0.4.6.post5' } as const;

export function modelInfo(c: InfoContext): string {
  const base = { model_path: c.model, tokenizer_path: c.model, is_generation: true };
  if (c.version === 'old') return JSON.stringify(base);
  return JSON.stringify({
    ...base,
    preferred_sampling_params: null,
    weight_version: 'default',
    has_image_understanding: false,
    has_audio_understanding: false,
    model_type: 'llama',
    architectures: ['LlamaForCausalLM'],
  });
}

export function serverInfo(c: InfoContext, s: EngineStats): string {
  return JSON.stringify({
    model_path: c.model,
    tokenizer_path: c.model,
    served_model_name: c.model,
    host: c.host,
    port: c.port,
    tp_size: 1,
    dp_size: 1,
    mem_fraction_static: 0.88,
    max_running_requests: c.engine.maxRunningRequests,
    max_total_tokens: c.engine.maxTotalNumTokens,
    chunked_prefill_size: 8192,
    max_prefill_tokens: 16384,
    schedule_policy: 'fcfs',
    enable_metrics: c.enableMetrics,
    max_total_num_tokens: c.engine.maxTotalNumTokens,
    max_req_input_len: c.engine.maxTotalNumTokens - 1,
    internal_states: [
      {
        last_gen_throughput: round2(s.genThroughput),
        memory_usage: {
          weight: 14.96,
          kvcache: round2(s.tokenUsage),
          token_capacity: c.engine.maxTotalNumTokens,
          graph: 1.44,
        },
        effective_max_running_requests_per_dp: c.engine.maxRunningRequests,
        num_running_reqs: s.running,
        num_queue_reqs: s.queued,
      },
    ],
    version: SGLANG_VERSION[c.version],
    ...kvEventsFields(c),
  });
}

export function modelsList(c: InfoContext): string {
  return JSON.stringify({
    object: 'list',
    data: [
      {
        id: c.model,
        object: 'model',
        created: c.startedAt,
        owned_by: c.kind === 'vllm' ? 'vllm' : 'sglang',
        root: c.model,
        parent: null,
        max_model_len: c.contextLen,
      },
    ],
  });
}

export function modelNotFound(name: string): string {
  return JSON.stringify({
    error: {
      message: `The model '${name}' does not exist`,
      type: 'invalid_request_error',
      param: 'model',
      code: 'model_not_found',
    },
  });
}

/** New: one entry per DP rank (legacy shim over `/v1/loads`); old (v0.4): `{"load": N}`. */
export function getLoad(c: InfoContext, s: EngineStats): string {
  if (c.version === 'old') return JSON.stringify({ load: s.usedTokens });
  return JSON.stringify([
    {
      dp_rank: 0,
      num_reqs: s.running + s.queued,
      num_waiting_reqs: s.queued,
      num_tokens: s.maxTotalNumTokens,
      num_pending_tokens: s.maxTotalNumTokens - s.usedTokens,
      ts_tic: Date.now() / 1000,
    },
  ]);
}

function round2(value: number): number {
  return Math.round(value * 100) / 100;
}

/** Python's prometheus_client prints floats: `3.0`, `0.25`. */
function num(value: number): string {
  return Number.isInteger(value) ? `${value}.0` : String(value);
}

export function metricsText(c: InfoContext, s: EngineStats): string {
  const out: string[] = [];
  const add = (name: string, type: 'gauge' | 'counter', help: string, value: number, labels: string) => {
    // prometheus_client names a counter family without `_total` and its sample with it.
    const family = type === 'counter' ? name.replace(/_total$/, '') : name;
    out.push(`# HELP ${family} ${help}`, `# TYPE ${family} ${type}`, `${name}{${labels}} ${num(value)}`);
  };
  const model = JSON.stringify(c.model);
  if (c.kind === 'vllm') {
    const labels = `engine="0",model_name=${model}`;
    add('vllm:num_requests_running', 'gauge', 'Number of requests in model execution batches.', s.running, labels);
    add('vllm:num_requests_waiting', 'gauge', 'Number of requests waiting to be processed.', s.queued, labels);
    add('vllm:kv_cache_usage_perc', 'gauge', 'KV-cache usage. 1 means 100 percent usage.', s.tokenUsage, labels);
    add(
      'vllm:num_preemptions_total',
      'counter',
      'Cumulative number of preemption from the engine.',
      s.retractionsTotal,
      labels,
    );
    add('vllm:prompt_tokens_total', 'counter', 'Number of prefill tokens processed.', s.promptTokensTotal, labels);
    add(
      'vllm:generation_tokens_total',
      'counter',
      'Number of generation tokens processed.',
      s.generationTokensTotal,
      labels,
    );
    return `${out.join('\n')}\n`;
  }
  const labels = `model_name=${model}`;
  add('sglang:num_running_reqs', 'gauge', 'The number of running requests.', s.running, labels);
  add('sglang:num_queue_reqs', 'gauge', 'The number of requests in the waiting queue.', s.queued, labels);
  add('sglang:num_used_tokens', 'gauge', 'The number of used tokens.', s.usedTokens, labels);
  add('sglang:token_usage', 'gauge', 'The token usage.', round4(s.tokenUsage), labels);
  add(
    'sglang:max_total_num_tokens',
    'gauge',
    'Maximum total number of tokens in the KV cache pool.',
    s.maxTotalNumTokens,
    labels,
  );
  add('sglang:gen_throughput', 'gauge', 'The generation throughput (token/s).', round2(s.genThroughput), labels);
  add('sglang:cache_hit_rate', 'gauge', 'The prefix cache hit rate.', round4(s.cacheHitRate), labels);
  add('sglang:num_retracted_reqs', 'gauge', 'The number of retracted requests.', s.lastRetracted, labels);
  add('sglang:prompt_tokens_total', 'counter', 'Number of prefill tokens processed.', s.promptTokensTotal, labels);
  add(
    'sglang:generation_tokens_total',
    'counter',
    'Number of generation tokens processed.',
    s.generationTokensTotal,
    labels,
  );
  add('sglang:cached_tokens_total', 'counter', 'Number of cached prompt tokens.', s.cachedTokensTotal, labels);
  add('sglang:num_requests_total', 'counter', 'Number of requests processed.', s.requestsTotal, labels);
  add('sglang:num_aborted_requests_total', 'counter', 'Number of requests aborted.', s.abortedTotal, labels);
  return `${out.join('\n')}\n`;
}

function round4(value: number): number {
  return Math.round(value * 10_000) / 10_000;
}
