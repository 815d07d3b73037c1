/**
 * `/v1/embeddings` through a batch, over real TCP to the simulated engines: `fleetgate batch --url`
 * with an input that mixes chat, completions and embeddings lines writes each custom_id once, with
 * status 200 and the body its url answers with (a chat message, a completion text, one vector per
 * input with `usage.prompt_tokens`); and the Batch API, driven by the `openai` npm SDK, takes a job
 * whose endpoint is `/v1/embeddings` and completes it.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import OpenAI, { toFile } from 'openai';
import {
  assertAnswerShape,
  chatLine,
  completionLine,
  embeddingLine,
  type OutputLine,
  readJsonl,
  requestsTo,
  tempDir,
} from '../helpers/batch.js';
import { spawnCli } from '../helpers/cli.js';
import { startReadyFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

const fastEngine = { engine: { tokenMs: 1, maxRunningRequests: 32 } };
const EACH = 40;

/** Each url's input line, and the custom_id prefix of its lines. */
const LINES = {
  '/v1/chat/completions': [chatLine, 'chat'],
  '/v1/completions': [completionLine, 'completion'],
  '/v1/embeddings': [embeddingLine, 'embedding'],
} as const;
type Url = keyof typeof LINES;

/** Every custom_id of `expected` exactly once, each a 200 answer of its url's shape. */
function assertOutput(lines: OutputLine[], expected: Map<string, Url>): void {
  const ids = lines.map((line) => line.custom_id);
  assert.equal(new Set(ids).size, ids.length, 'no custom_id twice');
  assert.deepEqual(new Set(ids), new Set(expected.keys()), 'every custom_id');
  for (const line of lines) {
    assert.equal(line.error, null, line.custom_id);
    assert.equal(line.response?.status_code, 200, line.custom_id);
    assertAnswerShape(expected.get(line.custom_id) ?? '', line.response?.body, line.custom_id);
  }
}

test('fleetgate batch: chat, completions and embeddings lines in one input, each answered once in its shape', async (t) => {
  const dir = tempDir(t);
  const { url, sims } = await startReadyFleet(t, [fastEngine, fastEngine], { log: { access: false } });
  const expected = new Map<string, Url>();
  const lines: string[] = [];
  for (let i = 0; i < EACH; i++) {
    for (const [path, [line, prefix]] of Object.entries(LINES) as Array<[Url, (typeof LINES)[Url]]>) {
      const id = `${prefix}-${i}`;
      expected.set(id, path);
      lines.push(line(id));
    }
  }
  const input = join(dir, 'input.jsonl');
  writeFileSync(input, `${lines.join('\n')}\n`);
  const output = join(dir, 'output.jsonl');

  const run = spawnCli(['batch', input, '-o', output, '--url', url]);
  t.after(() => run.child.kill('SIGKILL'));
  await waitFor(() => run.child.exitCode !== null || run.child.signalCode !== null, {
    timeoutMs: 90_000,
    intervalMs: 100,
    what: `fleetgate batch to exit: ${run.output()}`,
  });
  assert.equal(await run.closed, 0, run.output());
  assertOutput(readJsonl(output), expected);
  assert.equal(readJsonl(join(dir, 'output.errors.jsonl')).length, 0, 'no errors');
  for (const path of Object.keys(LINES)) assert.equal(requestsTo(sims, path), EACH, `${path}: each sent once`);
});

test('Batch API: a job with endpoint /v1/embeddings, created, polled and downloaded with the openai SDK', async (t) => {
  const dir = tempDir(t);
  const { url, sims } = await startReadyFleet(t, [fastEngine], {
    log: { access: false },
    batch: { dir: join(dir, 'batches') },
  });
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 2 });
  const ids = Array.from({ length: EACH }, (_, i) => `emb-${i}`);
  const content = `${ids.map((id) => embeddingLine(id)).join('\n')}\n`;
  const file = await client.files.create({ file: await toFile(Buffer.from(content), 'input.jsonl'), purpose: 'batch' });
  const created = await client.batches.create({
    input_file_id: file.id,
    endpoint: '/v1/embeddings',
    completion_window: '24h',
  });
  assert.equal(created.endpoint, '/v1/embeddings');

  const done = await waitFor(
    async () => {
      const batch = await client.batches.retrieve(created.id);
      return batch.status === 'completed' || batch.status === 'failed' ? batch : null;
    },
    { timeoutMs: 60_000, intervalMs: 100, what: 'the embeddings job to end' },
  );
  assert.equal(done.status, 'completed', JSON.stringify(done.errors));
  assert.deepEqual(done.request_counts, { total: EACH, completed: EACH, failed: 0 });
  const text = await (await client.files.content(done.output_file_id ?? '')).text();
  const lines = text
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as OutputLine);
  assertOutput(lines, new Map(ids.map((id) => [id, '/v1/embeddings'])));
  assert.equal(requestsTo(sims, '/v1/embeddings'), EACH, 'each sent once');
});
