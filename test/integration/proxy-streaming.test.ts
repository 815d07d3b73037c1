/** SSE through fleetgate: chunk by chunk, unchanged, aborted with the client, never passed off as whole when cut. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI from 'openai';
import { request } from 'undici';
import type { RequestRecord } from '../../src/proxy/proxy-events.js';
import { startReadyFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

const chat = (maxTokens: number) =>
  JSON.stringify({ model: 'm', stream: true, max_tokens: maxTokens, messages: [{ role: 'user', content: 'count' }] });

async function streamOf(url: string, maxTokens: number) {
  return request(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: chat(maxTokens),
  });
}

/** Per-request ids and timestamps differ between two runs; everything else must be identical. */
const normalize = (sse: string) => sse.replace(/"id":"[^"]*"/g, '"id":"X"').replace(/"created":\d+/g, '"created":0');

test('the stream through fleetgate is byte-for-byte what the backend sends (ids aside)', async (t) => {
  const {
    url,
    sims: [sim],
  } = await startReadyFleet(t, [{ engine: { tokenMs: 1 } }]);

  const direct = await streamOf(sim.url, 50);
  const directBody = await direct.body.text();
  const proxied = await streamOf(url, 50);
  assert.equal(proxied.statusCode, 200);
  assert.match(String(proxied.headers['content-type']), /text\/event-stream/);
  assert.equal(proxied.headers['content-encoding'], undefined, 'no compression');
  const proxiedBody = await proxied.body.text();
  assert.ok(directBody.endsWith('data: [DONE]\n\n'));
  assert.equal(Buffer.byteLength(proxiedBody), Buffer.byteLength(directBody));
  assert.equal(normalize(proxiedBody), normalize(directBody));
});

test('the first chunk reaches the client while the backend is still generating', async (t) => {
  const {
    url,
    sims: [sim],
  } = await startReadyFleet(t, [{ engine: { tokenMs: 40 } }]);

  const started = performance.now();
  const res = await streamOf(url, 25);
  const iterator = res.body[Symbol.asyncIterator]();
  const first = await iterator.next();
  const firstAt = performance.now() - started;
  assert.ok(!first.done);
  assert.match(String(first.value), /^data: /);
  assert.equal(sim.counters.completed, 0, 'the backend has not finished yet');
  let rest = '';
  for (let next = await iterator.next(); !next.done; next = await iterator.next()) rest += String(next.value);
  const totalAt = performance.now() - started;
  assert.ok(rest.endsWith('data: [DONE]\n\n'));
  assert.ok(firstAt < totalAt / 3, `first chunk at ${firstAt.toFixed(0)} ms of ${totalAt.toFixed(0)} ms`);
});

test('a client disconnect aborts the upstream request within 1 s', async (t) => {
  const {
    url,
    gateway,
    sims: [sim],
  } = await startReadyFleet(t, [{ engine: { tokenMs: 20 } }]);

  const records: RequestRecord[] = [];
  gateway.events.on('request', (record) => records.push(record));
  const controller = new AbortController();
  const res = await request(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: chat(500),
    signal: controller.signal,
  });
  const iterator = res.body[Symbol.asyncIterator]();
  await iterator.next();
  controller.abort();
  // The bound of the test's name: the backend sees the disconnect within 1 s of the client leaving.
  await waitFor(() => sim.counters.clientDisconnects === 1, {
    timeoutMs: 1_000,
    intervalMs: 5,
    what: 'upstream abort',
  });
  assert.equal(sim.counters.completed, 0, 'the generation was cut, not finished');
  await waitFor(() => records.length === 1, { what: 'the request recorded' });
  assert.equal(records[0].outcome, 'client_abort', 'recorded as the client leaving, not an upstream error');
  assert.equal(records[0].status, 200, 'the stream had started');
  await waitFor(() => gateway.fleet.registry.get(sim.name)?.inflight === 0, { what: 'slot released' });
  assert.equal(gateway.fleet.registry.get(sim.name)?.state, 'ready', 'a client leaving is not a backend failure');
});

test('a backend dying mid-stream with stream resume off: one error event, no [DONE]; the openai SDK raises', async (t) => {
  const {
    url,
    gateway,
    sims: [sim],
  } = await startReadyFleet(t, [{ engine: { tokenMs: 15 } }], { retry: { resume_limit: 0 } });

  // Raw view: what bytes does a client get?
  const res = await streamOf(url, 400);
  const chunks: string[] = [];
  const reading = (async () => {
    for await (const chunk of res.body) chunks.push(String(chunk));
  })();
  await waitFor(() => chunks.length >= 3, { what: 'a few chunks' });
  await sim.crash();
  await reading;
  const body = chunks.join('');
  assert.ok(!body.includes('[DONE]'), 'a cut stream never ends with [DONE]');
  const events = body.split('\n\n').filter((e) => e.length > 0);
  const last = events.at(-1) ?? '';
  assert.match(last, /^data: \{"error":/);
  const error = JSON.parse(last.slice('data: '.length)) as { error: { type: string; code: number; message: string } };
  assert.equal(error.error.type, 'upstream_error');
  assert.equal(error.error.code, 502);
  assert.equal(events.filter((e) => e.includes('"error"')).length, 1, 'exactly one error event');

  // The real client: the OpenAI SDK must surface it as an error, not a short answer.
  await sim.restart();
  await waitFor(() => gateway.fleet.registry.ready.length === 1, { timeoutMs: 10_000, what: 're-admitted' });
  const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
  const stream = await openai.chat.completions.create({
    model: 'm',
    stream: true,
    max_tokens: 400,
    messages: [{ role: 'user', content: 'count' }],
  });
  let received = 0;
  await assert.rejects(async () => {
    for await (const _chunk of stream) {
      received++;
      if (received === 3) void sim.crash();
    }
  }, /backend closed the connection|upstream/i);
  assert.ok(received >= 3);
});
