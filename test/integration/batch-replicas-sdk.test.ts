/**
 * The Batch API across replicas: three `fleetgate serve` processes, each in a working directory of
 * its own, share one PostgreSQL (`batch.database_url`); the `openai` SDK uploads through one,
 * creates the batch through a second, and retrieves, lists and downloads through the third. Without
 * a database, `routing.replicas: 2` makes the Batch API a 503 naming `batch.database_url`.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import OpenAI, { toFile } from 'openai';
import { request } from 'undici';
import { assertCompleteOutput, type OutputLine, tempDir, writeChatInput } from '../helpers/batch.js';
import { type BatchReplica, startBatchReplica, startBatchReplicas } from '../helpers/batch-replicas.js';
import { createSims } from '../helpers/fleet.js';
import { startPostgres } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';

const COUNT = 400;

async function readySims(t: Parameters<typeof createSims>[0]) {
  const sims = await createSims(t, [
    { engine: { tokenMs: 1, maxRunningRequests: 32 } },
    { engine: { tokenMs: 1, maxRunningRequests: 32 } },
  ]);
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady()));
  return sims;
}

test('three replicas, one PostgreSQL: upload through one, create through a second, read through the third', async (t) => {
  const pg = await startPostgres(t);
  const url = await pg.createDatabase();
  const sims = await readySims(t);
  const [one, two, three] = await startBatchReplicas(
    t,
    3,
    sims,
    `routing:\n  replicas: 3\nbatch:\n  database_url: ${url}\n  lease: 3s\n`,
  );
  const sdk = (replica: { url: string }) => new OpenAI({ baseURL: `${replica.url}/v1`, apiKey: 'none', maxRetries: 0 });
  const input = writeChatInput(tempDir(t), COUNT, 4);

  const file = await sdk(one as BatchReplica).files.create({
    file: await toFile(readFileSync(input), 'input.jsonl'),
    purpose: 'batch',
  });
  assert.equal(file.bytes, readFileSync(input).length);
  assert.equal(
    (await sdk(three as BatchReplica).files.retrieve(file.id)).id,
    file.id,
    'a file uploaded elsewhere is known',
  );

  const created = await sdk(two as BatchReplica).batches.create({
    input_file_id: file.id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
    metadata: { through: 'second' },
  });
  const reader = sdk(three as BatchReplica);
  const done = await waitFor(
    async () => {
      const batch = await reader.batches.retrieve(created.id);
      return batch.status === 'completed' ? batch : null;
    },
    { timeoutMs: 60_000, intervalMs: 200, what: 'the batch completed, seen through the third replica' },
  );
  assert.deepEqual(done.request_counts, { total: COUNT, completed: COUNT, failed: 0 });
  assert.deepEqual(done.metadata, { through: 'second' });
  const listed = await reader.batches.list({ limit: 10 });
  assert.deepEqual(
    listed.data.map((b) => b.id),
    [created.id],
  );
  assert.ok(done.output_file_id);
  const outputFile = await reader.files.retrieve(done.output_file_id);
  const content = await (await reader.files.content(done.output_file_id)).text();
  assert.equal(outputFile.bytes, Buffer.byteLength(content), 'the File object counts the bytes served');
  const lines = content
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as OutputLine);
  assertCompleteOutput(lines, COUNT);
  assert.equal(done.error_file_id, null);
});

test('routing.replicas: 2 without a database: the Batch API answers 503 naming batch.database_url', async (t) => {
  const sims = await readySims(t);
  const replica = await startBatchReplica(t, sims, 'routing:\n  replicas: 2\n');
  for (const [method, path] of [
    ['GET', '/v1/batches'],
    ['POST', '/v1/batches'],
    ['GET', '/v1/files/file-000000000000000000000000'],
  ] as const) {
    const res = await request(`${replica.url}${path}`, {
      method,
      headers: { 'content-type': 'application/json' },
      body: method === 'POST' ? '{}' : undefined,
    });
    assert.equal(res.statusCode, 503, `${method} ${path}`);
    const body = (await res.body.json()) as { error: { message: string } };
    assert.match(body.error.message, /batch\.database_url/);
  }
  await waitFor(() => /batch\.database_url/.test(replica.output()), { what: 'a start-up warning naming the key' });
  const chat = await request(`${replica.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'default', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] }),
  });
  assert.equal(chat.statusCode, 200, 'the traffic path is not refused');
  await chat.body.dump();
});
