/**
 * What a client sees of a simulated SGLang start-up, over real TCP: refused while loading,
 * `/health` 503 during warm-up (new) or 200 (old v0.4), info and generation endpoints answering
 * during warm-up, and the log written in SGLang's order with `\r`-redrawn progress bars.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { SimServer } from '../../src/sim/index.js';
import { freePort } from '../helpers/net.js';
import { waitFor } from '../helpers/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'sim-lifecycle-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** The error code of a failed request, or the status. */
async function probe(url: string): Promise<number | string> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
    await res.arrayBuffer();
    return res.status;
  } catch (error) {
    return ((error as { cause?: { code?: string } }).cause?.code ?? String(error)) as string;
  }
}

/** Asserts that every marker occurs, each after the previous one. */
function assertInOrder(text: string, markers: string[]): void {
  let from = 0;
  for (const marker of markers) {
    const at = text.indexOf(marker, from);
    assert.ok(at >= 0, `expected ${JSON.stringify(marker)} after offset ${from}`);
    from = at + marker.length;
  }
}

test('the port refuses connections while weights load, KV is allocated and graphs are captured', async (t) => {
  const port = await freePort();
  const server = new SimServer({
    port,
    timing: { shards: 8, shardMs: 15, kvMs: 30, graphBatches: 6, graphBatchMs: 10 },
  });
  t.after(() => server.stop());
  const seen = new Map<string, number | string>();
  server.on('status', (status: string) => seen.set(status, -1));
  server.start();
  for (const phase of ['loading_weights', 'allocating_kv_cache', 'capturing_cuda_graphs'] as const) {
    await waitFor(() => server.status === phase, { timeoutMs: 3000, what: phase });
    seen.set(phase, await probe(`${server.url}/health`));
  }
  await server.whenReady(5000);
  assert.equal(seen.get('loading_weights'), 'ECONNREFUSED');
  assert.equal(seen.get('allocating_kv_cache'), 'ECONNREFUSED');
  assert.equal(seen.get('capturing_cuda_graphs'), 'ECONNREFUSED');
  assert.equal(await probe(`${server.url}/health`), 200);
});

test('new SGLang: /health is 503 with an empty body during warm-up while info and generation already answer', async (t) => {
  const port = await freePort();
  const server = new SimServer({ port, timing: { warmupMs: 600 } });
  t.after(() => server.stop());
  server.start();
  await waitFor(() => server.status === 'warming_up', { timeoutMs: 3000 });

  const health = await fetch(`${server.url}/health`);
  assert.equal(health.status, 503);
  assert.equal(await health.text(), '');
  assert.equal((await fetch(`${server.url}/health_generate`)).status, 503);
  for (const path of [
    '/model_info',
    '/get_model_info',
    '/v1/models',
    '/server_info',
    '/get_server_info',
    '/get_load',
    '/metrics',
  ]) {
    const res = await fetch(`${server.url}${path}`);
    assert.equal(res.status, 200, path);
    await res.arrayBuffer();
  }
  const info = (await (await fetch(`${server.url}/model_info`)).json()) as Record<string, unknown>;
  assert.equal(info.model_path, 'meta-llama/Llama-3.1-8B-Instruct');
  assert.equal(info.is_generation, true);
  const serverInfo = (await (await fetch(`${server.url}/server_info`)).json()) as Record<string, unknown>;
  assert.equal(serverInfo.max_running_requests, 256);
  assert.equal(serverInfo.max_total_num_tokens, 400_000);
  assert.ok(Array.isArray(serverInfo.internal_states));

  const gen = await fetch(`${server.url}/generate`, {
    method: 'POST',
    body: JSON.stringify({ text: 'hi', sampling_params: { max_new_tokens: 2 } }),
  });
  assert.equal(gen.status, 200);
  assert.equal(((await gen.json()) as { text: string }).text, ' Paris.');
  assert.equal(server.status, 'warming_up', 'warm-up window too short for the assertions');
  assert.equal(server.counters.requestsWhileNotReady, 1);
  assert.equal(server.counters.requests, 1);

  await server.whenReady(5000);
  const ready = await fetch(`${server.url}/health`);
  assert.equal(ready.status, 200);
  assert.equal(await ready.text(), '');
});

test('old SGLang (v0.4): /health is 200 during warm-up; only /get_model_info exists', async (t) => {
  const port = await freePort();
  const server = new SimServer({ port, version: 'old', timing: { warmupMs: 400 } });
  t.after(() => server.stop());
  server.start();
  await waitFor(() => server.status === 'warming_up', { timeoutMs: 3000 });
  assert.equal(await probe(`${server.url}/health`), 200);
  assert.equal(await probe(`${server.url}/get_model_info`), 200);
  assert.equal(await probe(`${server.url}/model_info`), 404);
  assert.equal(server.status, 'warming_up');
  await server.whenReady(5000);
  const load = await (await fetch(`${server.url}/get_load`)).json();
  assert.deepEqual(Object.keys(load as object), ['load']);
});

test('the log follows SGLang start-up order, with tqdm bars redrawn by \\r and ended by \\n', async (t) => {
  const port = await freePort();
  const logFile = join(dir, 'sglang_gpu3.log');
  const server = new SimServer({ port, name: 'gpu3', logFile, timing: { shards: 4, graphBatches: 5 } });
  t.after(() => server.stop());
  server.start();
  await server.whenReady(5000);
  await waitFor(() => readFileSync(logFile, 'utf8').includes('ready to roll'), { timeoutMs: 2000 });
  const text = readFileSync(logFile, 'utf8');
  assertInOrder(text, [
    "server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct'",
    `port=${port}`,
    'Load weight begin. avail mem=',
    '\rLoading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]',
    '\rLoading safetensors checkpoint shards:  25% Completed | 1/4 [',
    '\rLoading safetensors checkpoint shards: 100% Completed | 4/4 [',
    '\rLoading safetensors checkpoint shards: 100% Completed | 4/4 [',
    'Load weight end.',
    'KV Cache is allocated. dtype: torch.bfloat16, #tokens: 400000, K size: ',
    'Memory pool end. avail mem=',
    'Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2, 4, 8, 16], avail mem=',
    '\rCapturing batches (bs=16 avail_mem=',
    '):   0%|          | 0/5 [00:00<?, ?it/s]',
    '\rCapturing batches (bs=8 avail_mem=',
    '):  20%|██        | 1/5 [',
    '100%|██████████| 5/5 [',
    'Capture target decode CUDA graph end. elapsed=',
    'max_total_num_tokens=400000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=256, context_len=131072',
    'INFO:     Started server process [',
    'INFO:     Application startup complete.',
    `INFO:     Uvicorn running on http://127.0.0.1:${port} (Press CTRL+C to quit)`,
    '"GET /model_info HTTP/1.1" 200 OK',
    'Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0',
    '"POST /generate HTTP/1.1" 200 OK',
    'The server is fired up and ready to roll!',
  ]);
  // Every line that is not a progress bar carries the real prefix; scheduler lines carry TP0.
  const lines = text.split('\n').filter((line) => line !== '' && !line.startsWith('\r'));
  for (const line of lines) assert.match(line, /^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d( TP0)?\] /, line);
  assert.match(text, /\n\[[^\]]+ TP0\] Load weight begin/);
  assert.match(text, /\n\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] The server is fired up and ready to roll!\n/);
  // A bar is one line of \r-separated redraws; the final 100% appears twice.
  const bar = text.split('\n').find((line) => line.startsWith('\rLoading safetensors')) ?? '';
  const redraws = bar.split('\r').filter(Boolean);
  assert.equal(redraws.length, 6);
  assert.match(
    redraws[2],
    /^Loading safetensors checkpoint shards: {2}50% Completed \| 2\/4 \[00:00<00:00, +\d+\.\d\dit\/s\]$/,
  );
  assert.equal(redraws.filter((r) => r.includes('100% Completed | 4/4')).length, 2);
});

test('old SGLang spells the capture and batch lines the old way', async (t) => {
  const port = await freePort();
  const logFile = join(dir, 'old.log');
  const server = new SimServer({ port, version: 'old', logFile, engine: { tokenMs: 0 } });
  t.after(() => server.stop());
  server.start();
  await server.whenReady(5000);
  const res = await fetch(`${server.url}/generate`, {
    method: 'POST',
    body: JSON.stringify({ text: 'x', sampling_params: { max_new_tokens: 45 } }),
  });
  assert.equal(res.status, 200);
  await res.arrayBuffer();
  await waitFor(() => readFileSync(logFile, 'utf8').includes('Decode batch.'), { timeoutMs: 2000 });
  assertInOrder(readFileSync(logFile, 'utf8'), [
    'Load weight end. type=LlamaForCausalLM',
    'KV Cache is allocated. #tokens: 400000',
    'Capture cuda graph begin. This can take up to several minutes. avail mem=',
    'Capture cuda graph bs [1, 2, 4, 8]',
    '\rCapturing batches (avail_mem=',
    'Capture cuda graph end. Time elapsed: ',
    '"GET /get_model_info HTTP/1.1" 200 OK',
    'The server is fired up and ready to roll!',
    'Prefill batch. #new-seq: 1',
    'Decode batch. #running-req: 1, #token: ',
  ]);
});

test('new SGLang batch lines: `Prefill batch,` and, every 40 decode steps, `Decode batch, ... cuda graph: True`', async (t) => {
  const port = await freePort();
  const logFile = join(dir, 'batches.log');
  const server = new SimServer({ port, logFile, engine: { tokenMs: 0 } });
  t.after(() => server.stop());
  server.start();
  await server.whenReady(5000);
  const res = await fetch(`${server.url}/generate`, {
    method: 'POST',
    body: JSON.stringify({ text: 'x', sampling_params: { max_new_tokens: 45 } }),
  });
  await res.arrayBuffer();
  await waitFor(() => readFileSync(logFile, 'utf8').includes('Decode batch,'), { timeoutMs: 2000 });
  assert.match(
    readFileSync(logFile, 'utf8'),
    /TP0\] Decode batch, #running-req: 1, #token: \d+, token usage: 0\.00, cuda graph: True, gen throughput \(token\/s\): \d+\.\d\d, #queue-req: 0\n/,
  );
});

test('deprecated aliases answer and log the deprecation line', async (t) => {
  const port = await freePort();
  const logFile = join(dir, 'deprecated.log');
  const server = new SimServer({ port, logFile });
  t.after(() => server.stop());
  server.start();
  await server.whenReady(5000);
  assert.equal(await probe(`${server.url}/get_model_info`), 200);
  assert.equal(await probe(`${server.url}/get_server_info`), 200);
  await waitFor(() => readFileSync(logFile, 'utf8').includes("'/get_server_info' is deprecated"), { timeoutMs: 2000 });
  assert.match(
    readFileSync(logFile, 'utf8'),
    /Endpoint '\/get_model_info' is deprecated and will be removed in a future version\. Please use '\/model_info' instead\./,
  );
});
