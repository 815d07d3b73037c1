/**
 * The OpenAI Batch API on fleetgate's URL, driven by the `openai` npm SDK unchanged: upload,
 * create, poll, list, download; fleetgate is stopped and started again mid-job (same batch.dir)
 * and the job completes with every custom_id exactly once. With `auth.api_keys`, the endpoints
 * refuse a request without a key.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import OpenAI, { toFile } from 'openai';
import pino from 'pino';
import { request } from 'undici';
import { createGateway, type Gateway } from '../../src/app.js';
import { validateConfig } from '../../src/config/validate.js';
import { assertCompleteOutput, type OutputLine, tempDir, writeChatInput } from '../helpers/batch.js';
import { backendsFor, createSims } from '../helpers/fleet.js';
import { freePorts } from '../helpers/net.js';
import { waitFor } from '../helpers/wait.js';

const COUNT = 1500;
const KEY = 'sk-batch-test';

test('openai SDK: files.create, batches.create/retrieve/list/cancel, files.content; a restart mid-job', async (t) => {
  const dir = tempDir(t);
  const input = writeChatInput(dir, COUNT, 8);
  const sims = await createSims(t, [
    { engine: { tokenMs: 2, maxRunningRequests: 32 } },
    { engine: { tokenMs: 2, maxRunningRequests: 32 } },
  ]);
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady()));
  const [port] = await freePorts(1);
  const config = () =>
    validateConfig(
      {
        listen: `127.0.0.1:${port}`,
        backends: backendsFor(sims),
        auth: { api_keys: [KEY] },
        log: { access: false },
        batch: { dir: join(dir, 'batches') },
      },
      'test',
    );
  const open: Gateway[] = [];
  t.after(() => Promise.all(open.map((g) => g.close())));
  const start = async () => {
    const gateway = await createGateway(config(), { logger: pino({ level: 'silent' }) });
    open.push(gateway);
    await gateway.listen();
    await waitFor(() => gateway.fleet.registry.ready.length === sims.length, { what: 'fleet ready' });
    return gateway;
  };
  let gateway = await start();
  const base = `http://127.0.0.1:${port}`;
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: KEY, maxRetries: 5 });

  const unauthorised = await request(`${base}/v1/batches`);
  assert.equal(unauthorised.statusCode, 401, 'no key, no batches');
  await unauthorised.body.dump();

  const file = await client.files.create({ file: await toFile(readFileSync(input), 'input.jsonl'), purpose: 'batch' });
  assert.equal(file.object, 'file');
  assert.equal(file.purpose, 'batch');
  assert.equal(file.bytes, readFileSync(input).length);
  assert.equal((await client.files.retrieve(file.id)).id, file.id);

  const created = await client.batches.create({
    input_file_id: file.id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
    metadata: { job: 'sdk-test' },
  });
  assert.equal(created.object, 'batch');
  assert.ok(['validating', 'in_progress'].includes(created.status), created.status);

  const other = await client.batches.create({
    input_file_id: file.id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  });
  const cancelling = await client.batches.cancel(other.id);
  assert.ok(['cancelling', 'cancelled'].includes(cancelling.status), cancelling.status);

  // Stop fleetgate once a part of the job is done, and start it again on the same batch.dir.
  await waitFor(async () => (await client.batches.retrieve(created.id)).request_counts!.completed >= COUNT * 0.2, {
    timeoutMs: 60_000,
    intervalMs: 100,
    what: 'a fifth of the job done',
  });
  await gateway.close();
  open.splice(open.indexOf(gateway), 1);
  const before = sims.reduce((n, s) => n + (s.counters.byPath['/v1/chat/completions'] ?? 0), 0);
  gateway = await start();
  const resumed = await client.batches.retrieve(created.id);
  assert.ok(resumed.request_counts!.completed < COUNT, 'stopped before the end');

  const done = await waitFor(
    async () => {
      const b = await client.batches.retrieve(created.id);
      return b.status === 'completed' ? b : null;
    },
    { timeoutMs: 60_000, intervalMs: 200, what: 'the job completed' },
  );
  assert.deepEqual(done.request_counts, { total: COUNT, completed: COUNT, failed: 0 });
  assert.ok(done.output_file_id, 'an output file');
  assert.equal(done.error_file_id ?? null, null, 'no error file');
  assert.ok(done.in_progress_at! >= done.created_at && done.completed_at! >= done.in_progress_at!);
  assert.deepEqual(done.metadata, { job: 'sdk-test' });
  const text = await (await client.files.content(done.output_file_id!)).text();
  const lines = text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as OutputLine);
  assertCompleteOutput(lines, COUNT);
  const received = sims.reduce((n, s) => n + (s.counters.byPath['/v1/chat/completions'] ?? 0), 0);
  t.diagnostic(`engines received ${received} for ${COUNT} (${before} before the restart)`);

  const listed = [];
  for await (const b of client.batches.list({ limit: 1 })) listed.push(b.id);
  assert.deepEqual(new Set(listed), new Set([created.id, other.id]), 'both jobs, page by page');
  assert.equal((await client.batches.retrieve(other.id)).status, 'cancelled');

  const metrics = await (await request(`${base}/metrics`)).body.text();
  assert.match(metrics, /fleetgate_batch_requests_total\{status="completed"\} \d+/);
  assert.match(metrics, /fleetgate_batch_jobs\{status="completed"\} 1/);
  assert.match(metrics, /fleetgate_batch_jobs\{status="cancelled"\} 1/);
});
