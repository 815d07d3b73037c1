import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseBackendLoad, parseMaxRunning } from '../../src/fleet/backend-metrics.js';

const SGLANG = `# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="m",tp_rank="0"} 12.0
sglang:num_running_reqs{engine_type="unified",model_name="m",tp_rank="1"} 3.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m",tp_rank="0"} 5.0
sglang:num_queue_reqs{model_name="m",tp_rank="1"} 0.0
sglang:token_usage{model_name="m",tp_rank="0"} 0.42
sglang:token_usage{model_name="m",tp_rank="1"} 0.17
sglang:max_total_num_tokens{model_name="m",tp_rank="0"} 400000.0
sglang:max_total_num_tokens{model_name="m",tp_rank="1"} 400000.0
sglang:cache_hit_rate{model_name="m",tp_rank="0"} 0.5
sglang:cache_hit_rate{model_name="m",tp_rank="1"} 0.25
sglang:num_running_reqs_total_fake 99
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m"} 7.557572e+06
`;

const VLLM = `vllm:num_requests_running{engine="0",model_name="m"} 7.0
vllm:num_requests_waiting{engine="0",model_name="m"} 2.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
vllm:generation_tokens_total{engine="0",model_name="m"} 1200.0
vllm:prompt_tokens_total{engine="0",model_name="m"} 3400.0
`;

test('SGLang gauges are summed over ranks; KV usage is the fullest rank; cache hit rate the mean', () => {
  assert.deepEqual(parseBackendLoad(SGLANG, 'sglang'), {
    running: 15,
    queued: 5,
    tokenUsage: 0.42,
    generationTokens: 7_557_572,
    promptTokens: null,
    kvTokens: 800_000,
    cacheHitRate: 0.375,
  });
});

test('vLLM names', () => {
  assert.deepEqual(parseBackendLoad(VLLM, 'vllm'), {
    running: 7,
    queued: 2,
    tokenUsage: 0.5,
    generationTokens: 1200,
    promptTokens: 3400,
    kvTokens: null,
    cacheHitRate: null,
  });
});

test('the generation-token counter is summed over ranks (SGLang and vLLM names)', () => {
  const sglang =
    'sglang:num_running_reqs{tp_rank="0"} 1.0\nsglang:generation_tokens_total{tp_rank="0"} 1200.0\nsglang:generation_tokens_total{tp_rank="1"} 34.0\n';
  assert.equal(parseBackendLoad(sglang, 'sglang')?.generationTokens, 1234);
  const vllm = `vllm:num_requests_running{engine="0"} 1.0\nvllm:generation_tokens_total{engine="0",model_name="m"} 987.0\nvllm:generation_tokens_created 1.7e9\n`;
  assert.equal(parseBackendLoad(vllm, 'vllm')?.generationTokens, 987);
});

test('no running gauge means no report (fall back to in-flight counts)', () => {
  assert.equal(parseBackendLoad('# nothing here\nfoo 1\n', 'sglang'), null);
});

test('max running requests from /server_info, per DP rank or the server argument', () => {
  const perRank = JSON.stringify({
    max_running_requests: 4096,
    internal_states: [{ effective_max_running_requests_per_dp: 48 }, { effective_max_running_requests_per_dp: 48 }],
  });
  assert.equal(parseMaxRunning(perRank), 96);
  assert.equal(parseMaxRunning(JSON.stringify({ max_running_requests: 256 })), 256);
  assert.equal(parseMaxRunning('not json'), null);
});
