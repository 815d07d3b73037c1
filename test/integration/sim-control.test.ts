/**
 * Driving simulated servers in-process and their variants: restart() with a fresh log, vLLM mode,
 * `--api-key`, metrics switched off, request counting and events, and a fleet.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { get } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import OpenAI from 'openai';
import { fleetOptions, SimFleet, SimServer } from '../../src/sim/index.js';
import { freePort, freePorts } from '../helpers/net.js';
import { once, waitFor } from '../helpers/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'sim-control-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** GET on a fresh connection: the status or the connect error code. */
function probe(url: string, headers: Record<string, string> = {}): Promise<number | string> {
  return new Promise((resolve) => {
    const req = get(url, { agent: false, headers, timeout: 2000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
}

test('restart(): the port closes while it reloads, the log starts afresh, and it is ready again', async (t) => {
  const logFile = join(dir, 'restart.log');
  const server = new SimServer({ port: await freePort(), logFile, timing: { shards: 6, shardMs: 15 } });
  t.after(() => server.stop());
  server.start();
  await server.whenReady(3000);
  await probe(`${server.url}/v1/models`);
  await waitFor(() => readFileSync(logFile, 'utf8').includes('"GET /v1/models HTTP/1.1" 200 OK'), { timeoutMs: 2000 });

  const statuses: string[] = [];
  server.on('status', (s: string) => statuses.push(s));
  await server.restart({ engine: { maxRunningRequests: 8 } });
  assert.equal(server.status, 'loading_weights');
  assert.equal(await probe(`${server.url}/health`), 'ECONNREFUSED');
  await server.whenReady(3000);
  assert.deepEqual(statuses, [
    'loading_weights',
    'allocating_kv_cache',
    'capturing_cuda_graphs',
    'warming_up',
    'ready',
  ]);
  assert.equal(await probe(`${server.url}/health`), 200);
  const text = readFileSync(logFile, 'utf8');
  assert.ok(text.startsWith('['));
  assert.ok(!text.includes('GET /v1/models'), 'the old run was truncated away');
  assert.match(text, /max_running_requests=8,/);
  const info = (await (await fetch(`${server.url}/server_info`)).json()) as { max_running_requests: number };
  assert.equal(info.max_running_requests, 8);
});

test('restart() after a crash brings the server back', async (t) => {
  const server = new SimServer({ port: await freePort() });
  t.after(() => server.stop());
  server.start();
  await server.whenReady(3000);
  await server.crash();
  assert.equal(server.status, 'exited');
  assert.equal(await probe(`${server.url}/health`), 'ECONNREFUSED');
  await server.restart();
  await server.whenReady(3000);
  assert.equal(await probe(`${server.url}/health`), 200);
});

test('stop() closes the port and leaves the server restartable with start()', async (t) => {
  const server = new SimServer({ port: await freePort() });
  t.after(() => server.stop());
  server.start();
  await server.whenReady(3000);
  await server.stop();
  assert.equal(server.status, 'stopped');
  assert.equal(await probe(`${server.url}/health`), 'ECONNREFUSED');
  server.start();
  await server.whenReady(3000);
  assert.equal(await probe(`${server.url}/health`), 200);
});

test('vllm: the port opens only when the engine is built, /health is 200 at once, vLLM logs and metrics', async (t) => {
  const logFile = join(dir, 'vllm.log');
  const server = new SimServer({
    port: await freePort(),
    kind: 'vllm',
    logFile,
    timing: { shards: 5, shardMs: 15, warmupMs: 40 },
  });
  t.after(() => server.stop());
  const first: (number | string)[] = [];
  server.start();
  await waitFor(() => server.status === 'loading_weights', { timeoutMs: 2000 });
  assert.equal(await probe(`${server.url}/health`), 'ECONNREFUSED');
  // Probe until the port opens: the first answer is already 200, never 503.
  await waitFor(
    async () => {
      const status = await probe(`${server.url}/health`);
      if (status !== 'ECONNREFUSED') first.push(status);
      return status !== 'ECONNREFUSED';
    },
    { timeoutMs: 3000, intervalMs: 5 },
  );
  assert.deepEqual(first, [200]);
  await server.whenReady(2000);
  assert.equal(server.status, 'ready');
  assert.equal(await probe(`${server.url}/v1/models`), 200);
  assert.equal(await probe(`${server.url}/model_info`), 404);
  const metrics = await (await fetch(`${server.url}/metrics`)).text();
  assert.match(
    metrics,
    /^vllm:num_requests_running\{engine="0",model_name="meta-llama\/Llama-3.1-8B-Instruct"\} 0\.0$/m,
  );
  assert.match(metrics, /^vllm:num_requests_waiting\{/m);
  assert.match(metrics, /^vllm:kv_cache_usage_perc\{/m);
  const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'x', maxRetries: 0 });
  const res = await client.chat.completions.create({
    model: 'm',
    messages: [{ role: 'user', content: 'hi' }],
    max_tokens: 2,
  });
  assert.equal(res.choices[0].message.content, ' Paris.');
  await waitFor(() => readFileSync(logFile, 'utf8').includes('Application startup complete.'), { timeoutMs: 2000 });
  const text = readFileSync(logFile, 'utf8');
  assert.match(
    text,
    /^\(APIServer pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[api_server\.py:\d+\] vLLM API server version/,
  );
  assert.ok(text.indexOf('GPU KV cache size: 400,000 tokens') < text.indexOf('Starting vLLM API server 0 on'));
  assert.ok(text.includes('\rCapturing CUDA graphs (decode, FULL): 100%|██████████|'));
  assert.ok(
    text.indexOf('init engine (profile, create kv cache, warmup model) took') <
      text.indexOf('Application startup complete.'),
  );
});

test('vllm: a dead engine answers /health 503', async (t) => {
  const server = new SimServer({
    port: await freePort(),
    kind: 'vllm',
    failure: { mode: 'scheduler_dead_http_alive', afterMs: 5 },
  });
  t.after(() => server.stop());
  server.start();
  await waitFor(() => server.status === 'failed', { timeoutMs: 3000 });
  assert.equal(await probe(`${server.url}/health`), 503);
});

test('api key: 401 without the bearer token except health and metrics; the SDK with the key works', async (t) => {
  const server = new SimServer({ port: await freePort(), apiKey: 'sk-sim' });
  t.after(() => server.stop());
  server.start();
  await server.whenReady(3000);
  const res = await fetch(`${server.url}/v1/models`);
  assert.equal(res.status, 401);
  assert.deepEqual(await res.json(), { error: 'Unauthorized' });
  assert.equal(await probe(`${server.url}/generate`), 401);
  assert.equal(await probe(`${server.url}/v1/models`, { authorization: 'Bearer wrong' }), 401);
  assert.equal(await probe(`${server.url}/v1/models`, { authorization: 'Bearer sk-sim' }), 200);
  assert.equal(await probe(`${server.url}/health`), 200);
  assert.equal(await probe(`${server.url}/metrics`), 200);
  const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'sk-sim', maxRetries: 0 });
  const completion = await client.completions.create({ model: 'm', prompt: 'x', max_tokens: 1 });
  assert.equal(completion.choices[0].text, ' Paris');
  const denied = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'nope', maxRetries: 0 });
  await assert.rejects(denied.models.list(), OpenAI.AuthenticationError);
});

test('enableMetrics false: /metrics is 404 like SGLang without --enable-metrics', async (t) => {
  const server = new SimServer({ port: await freePort(), enableMetrics: false });
  t.after(() => server.stop());
  server.start();
  await server.whenReady(3000);
  assert.equal(await probe(`${server.url}/metrics`), 404);
});

test('counters and request events: info paths are not counted as requests', async (t) => {
  const server = new SimServer({ port: await freePort() });
  t.after(() => server.stop());
  const paths: string[] = [];
  server.on('request', (r: { path: string }) => paths.push(r.path));
  server.start();
  await server.whenReady(3000);
  for (const path of [
    '/health',
    '/health_generate',
    '/metrics',
    '/get_load',
    '/model_info',
    '/v1/models',
    '/server_info',
  ]) {
    assert.equal(await probe(`${server.url}${path}?x=1`), 200, path);
  }
  await fetch(`${server.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"prompt":"x","max_tokens":1}',
  }).then((r) => r.text());
  assert.equal(await probe(`${server.url}/nope`), 404);
  assert.equal(server.counters.requests, 2);
  assert.equal(server.counters.requestsWhileNotReady, 0);
  assert.equal(server.counters.completed, 1);
  assert.equal(server.counters.byPath['/health'], 1);
  assert.equal(server.counters.byPath['/v1/completions'], 1);
  assert.equal(paths.length, 9);
});

test('SimFleet starts gpu0..gpuN with their own logs and failures, and stops them all', async (t) => {
  const ports = await freePorts(3);
  const fleet = new SimFleet(
    fleetOptions({
      ports,
      speed: 'fast',
      logDir: dir,
      staggerMs: 20,
      failures: new Map([[1, { mode: 'cuda_oom_capture' }]]),
    }),
  );
  t.after(() => fleet.stop());
  fleet.start();
  const [gpu0, gpu1, gpu2] = fleet.servers;
  assert.deepEqual(
    fleet.servers.map((s) => s.name),
    ['gpu0', 'gpu1', 'gpu2'],
  );
  await Promise.all([
    gpu0.whenReady(3000),
    gpu2.whenReady(3000),
    gpu1.status === 'exited' ? null : once(gpu1, 'exit', 3000),
  ]);
  assert.equal(gpu1.status, 'exited');
  assert.match(readFileSync(join(dir, 'sglang_gpu1.log'), 'utf8'), /GPU 1 has a total capacity/);
  assert.match(readFileSync(join(dir, 'sglang_gpu2.log'), 'utf8'), /base_gpu_id=2/);
  await fleet.stop();
  for (const server of fleet.servers) assert.equal(server.status, 'stopped');
  assert.equal(await probe(`${gpu0.url}/health`), 'ECONNREFUSED');
});
