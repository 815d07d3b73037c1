/**
 * Continuous batching as a client sees it: a batch cap that queues requests (latency grows with
 * load), KV-pool retraction under a tiny pool, aborts on client disconnect and `/abort_request`,
 * `slow()`, and thousands of concurrent streams.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { test } from 'node:test';
import { SimServer } from '../../src/sim/index.js';
import type { SimEngineOptions } from '../../src/sim/types.js';
import { freePort } from '../helpers/net.js';
import { waitFor } from '../helpers/wait.js';

async function started(
  t: { after(fn: () => Promise<void>): void },
  engine: Partial<SimEngineOptions>,
): Promise<SimServer> {
  const server = new SimServer({ port: await freePort(), engine });
  t.after(() => server.stop());
  server.start();
  await server.whenReady(5000);
  return server;
}

interface GenerateBody {
  text: string;
  meta_info: { completion_tokens: number; total_retractions: number; finish_reason: { type: string } };
}

async function generate(server: SimServer, body: object, signal?: AbortSignal): Promise<GenerateBody> {
  const res = await fetch(`${server.url}/generate`, { method: 'POST', body: JSON.stringify(body), signal });
  assert.equal(res.status, 200);
  return (await res.json()) as GenerateBody;
}

async function metric(server: SimServer, name: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`));
  assert.ok(line, `${name} in /metrics`);
  return Number(line.split(' ').at(-1));
}

/** Timers never fire early, so elapsed time has a firm lower bound; upper bounds stay loose for busy CI machines. */
async function timed(fn: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

test('with max_running_requests 2, six concurrent requests take about three times as long as one', async (t) => {
  const tokenMs = 15;
  const tokens = 10;
  const ideal = tokenMs * tokens;
  const server = await started(t, { maxRunningRequests: 2, tokenMs, batchPenalty: 0 });
  const body = { text: 'x', sampling_params: { max_new_tokens: tokens } };
  let single = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 3; i++) single = Math.min(single, await timed(() => generate(server, body)));

  const seen: number[] = [];
  const poll = setInterval(async () => seen.push(await metric(server, 'sglang:num_queue_reqs').catch(() => 0)), 15);
  const six = await timed(() => Promise.all(Array.from({ length: 6 }, () => generate(server, body))));
  clearInterval(poll);
  const report = `6 requests took ${six.toFixed(0)} ms, one took ${single.toFixed(0)} ms (ideal ${ideal} ms)`;
  // Three waves of two: without the cap all six would finish in about one request's time.
  assert.ok(six >= 2.6 * ideal, report);
  assert.ok(six / single > 2 && six / single < 5, report);
  assert.ok(Math.max(...seen) >= 2, `the queue was visible in /metrics: ${seen.join(',')}`);
});

test('step time grows with the batch and with slow()', async (t) => {
  const tokenMs = 4;
  const tokens = 10;
  const server = await started(t, { maxRunningRequests: 64, tokenMs, batchPenalty: 0.05 });
  const body = { text: 'x', sampling_params: { max_new_tokens: tokens } };
  const alone = await timed(() => generate(server, body));
  // 40 running: each step is 1 + 0.05 * 40 = 3x the single-request step.
  const crowded = await timed(() => Promise.all(Array.from({ length: 40 }, () => generate(server, body))));
  assert.ok(crowded >= 0.95 * 3 * tokenMs * tokens, `batch of 40: ${crowded.toFixed(0)} ms`);
  assert.ok(crowded > alone, `batch of 40: ${crowded.toFixed(0)} ms vs ${alone.toFixed(0)} ms alone`);

  server.slow(4);
  const slowed = await timed(() => generate(server, body));
  assert.ok(slowed >= 0.95 * 4 * tokenMs * tokens, `slow(4): ${slowed.toFixed(0)} ms vs ${alone.toFixed(0)} ms`);
});

test('a tiny KV pool forces retractions, counted and visible in /metrics and meta_info', async (t) => {
  const server = await started(t, { maxTotalNumTokens: 200, maxRunningRequests: 10, tokenMs: 2 });
  // 16 characters = 4 prompt tokens; 40 output tokens each. Admission wants a newcomer's 4 + 40 + a
  // page free, but counts the running ones' future tokens at only ~70 %: 5 are admitted, and
  // 5 x 44 > 200.
  const results = await Promise.all(
    Array.from({ length: 6 }, () =>
      generate(server, { text: 'abcdabcdabcdabcd', sampling_params: { max_new_tokens: 40 } }),
    ),
  );
  for (const r of results) assert.equal(r.meta_info.completion_tokens, 40);
  assert.ok(server.counters.retractions >= 1, `retractions: ${server.counters.retractions}`);
  assert.ok(results.some((r) => r.meta_info.total_retractions > 0));
  assert.ok((await metric(server, 'sglang:num_retracted_reqs')) >= 1);
  assert.equal(await metric(server, 'sglang:num_used_tokens'), 0);
  assert.equal(await metric(server, 'sglang:max_total_num_tokens'), 200);
});

test('a prompt larger than the KV pool is refused with 400', async (t) => {
  const server = await started(t, { maxTotalNumTokens: 10 });
  const res = await fetch(`${server.url}/generate`, {
    method: 'POST',
    body: JSON.stringify({ text: 'x'.repeat(100) }),
  });
  assert.equal(res.status, 400);
  assert.match(((await res.json()) as { message: string }).message, /longer than the model's context length/);
});

test('a streaming client that goes away is counted and its request aborted, freeing its slot', async (t) => {
  const server = await started(t, { tokenMs: 10, maxRunningRequests: 1 });
  const disconnects: unknown[] = [];
  server.on('disconnect', () => disconnects.push(1));
  const firstChunk = new Promise<void>((resolve, reject) => {
    const req = request(`${server.url}/generate`, { method: 'POST' }, (res) => {
      res.once('data', () => {
        req.destroy();
        resolve();
      });
    });
    req.on('error', () => {});
    req.once('error', reject);
    req.end(JSON.stringify({ text: 'x', stream: true, sampling_params: { max_new_tokens: 10_000 } }));
  });
  await firstChunk;
  await waitFor(() => server.counters.clientDisconnects === 1, { timeoutMs: 2000 });
  assert.equal(server.counters.aborted, 1);
  assert.equal(server.counters.completed, 0);
  assert.equal(disconnects.length, 1);
  // The only batch slot is free again: the next request runs at once.
  const next = await generate(server, { text: 'y', sampling_params: { max_new_tokens: 2 } }, AbortSignal.timeout(1000));
  assert.equal(next.text, ' Paris.');
  assert.equal(await metric(server, 'sglang:num_running_reqs'), 0);
  assert.equal(await metric(server, 'sglang:num_aborted_requests_total'), 1);
});

test('a non-streaming client that goes away is aborted too', async (t) => {
  const server = await started(t, { tokenMs: 10 });
  const controller = new AbortController();
  const pending = generate(server, { text: 'x', sampling_params: { max_new_tokens: 10_000 } }, controller.signal);
  await waitFor(async () => (await metric(server, 'sglang:num_running_reqs')) === 1, { timeoutMs: 2000 });
  controller.abort();
  await assert.rejects(pending);
  await waitFor(() => server.counters.clientDisconnects === 1, { timeoutMs: 2000 });
  await waitFor(async () => (await metric(server, 'sglang:num_running_reqs')) === 0, { timeoutMs: 2000 });
  assert.equal(server.counters.aborted, 1);
});

test('/abort_request ends a stream with finish_reason abort and [DONE]', async (t) => {
  const server = await started(t, { tokenMs: 10 });
  const res = await fetch(`${server.url}/generate`, {
    method: 'POST',
    body: JSON.stringify({ text: 'x', rid: 'req-42', stream: true, sampling_params: { max_new_tokens: 10_000 } }),
  });
  const body = res.text();
  await waitFor(async () => (await metric(server, 'sglang:num_running_reqs')) === 1, { timeoutMs: 2000 });
  const abort = await fetch(`${server.url}/abort_request`, { method: 'POST', body: JSON.stringify({ rid: 'req-42' }) });
  assert.equal(abort.status, 200);
  assert.equal(await abort.text(), '');
  const events = (await body).split('\n\n').filter(Boolean);
  assert.equal(events.at(-1), 'data: [DONE]');
  assert.equal(JSON.parse((events.at(-2) as string).slice(6)).meta_info.finish_reason.type, 'abort');
  assert.equal(server.counters.aborted, 1);
  assert.equal(server.counters.clientDisconnects, 0);
});

test('two thousand concurrent streams all complete', async (t) => {
  const server = await started(t, { tokenMs: 0, maxRunningRequests: 4096 });
  const n = 2000;
  const bodies = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<string>((resolve, reject) => {
          const req = request(
            `${server.url}/v1/completions`,
            { method: 'POST', headers: { 'content-type': 'application/json' }, agent: false },
            (res) => {
              let text = '';
              res.setEncoding('utf8');
              res.on('data', (chunk: string) => {
                text += chunk;
              });
              res.on('end', () => resolve(text));
              res.on('error', reject);
            },
          );
          req.on('error', reject);
          req.end(JSON.stringify({ prompt: 'x', max_tokens: 8, stream: true }));
        }),
    ),
  );
  assert.equal(bodies.filter((b) => b.endsWith('data: [DONE]\n\n')).length, n);
  assert.equal(server.counters.completed, n);
  assert.equal(server.counters.generatedTokens, n * 8);
});
