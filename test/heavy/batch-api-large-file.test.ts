/**
 * The Batch API with a 1 GB file, through the `openai` SDK: `files.create` uploads it (streamed to
 * disk), a job runs from it (the input read as a stream, twice), its output and the file itself are
 * downloaded (`files.content` streams); fleetgate, a process of its own run as installed
 * (`node dist/cli/index.js`, shipped config), stays under 300 MB of resident memory throughout.
 * The file has few, big lines (~256 KB: a long `user` field on a short chat request) so that the
 * job, 4,096 requests, fits a test's minute on a shared machine.
 */
import assert from 'node:assert/strict';
import { createReadStream, createWriteStream, statSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { test } from 'node:test';
import OpenAI from 'openai';
import { generationRequests, tempDir } from '../helpers/batch.js';
import { assertCompleteOutputStreamed, watchPeakRss, writeLines } from '../helpers/batch-files.js';
import { spawnBuiltCli } from '../helpers/cli.js';
import { createSims } from '../helpers/fleet.js';
import { HEAVY } from '../helpers/heavy.js';
import { freePorts } from '../helpers/net.js';
import { waitFor } from '../helpers/wait.js';

const MB = 1e6;
const COUNT = 4096;
const LINE_BYTES = 256 * 1024;
/** The bound for fleetgate's resident memory. */
const RSS_BOUND = 300 * MB;

// A gigabyte in, through a job and out again takes 2-3 minutes on a shared 2-core machine; the
// suite's --test-timeout (package.json) leaves room for it.
test('a 1 GB file: uploaded with the SDK, run as a job, downloaded; fleetgate under 300 MB', {
  ...HEAVY,
  timeout: 360_000,
}, async (t) => {
  const dir = tempDir(t);
  const input = join(dir, 'input.jsonl');
  const padding = 'p'.repeat(LINE_BYTES);
  await writeLines(
    input,
    COUNT,
    (i) =>
      `{"custom_id":"req-${i}","method":"POST","url":"/v1/chat/completions","body":{"model":"default","max_tokens":4,"messages":[{"role":"user","content":"question ${i}"}],"user":"${padding}"}}`,
  );
  const size = statSync(input).size;
  assert.ok(size >= 2 ** 30, `a 1 GiB input (${size} bytes)`);
  const sims = await createSims(t, [
    { engine: { tokenMs: 0, maxRunningRequests: 8 } },
    { engine: { tokenMs: 0, maxRunningRequests: 8 } },
  ]);
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady()));
  const [port] = await freePorts(1);
  const serve = spawnBuiltCli([
    'serve',
    '--listen',
    `127.0.0.1:${port}`,
    '--backend',
    sims.map((s) => `http://127.0.0.1:${s.port}`).join(','),
    '--set',
    `batch.dir=${join(dir, 'batches')}`,
    '--set',
    'batch.max_file_size=2GiB',
    '--set',
    'routing.max_inflight_per_backend=8',
  ]);
  t.after(() => serve.child.kill('SIGKILL'));
  const rss = watchPeakRss(serve.child.pid as number);
  t.after(() => rss.stop());
  const base = `http://127.0.0.1:${port}`;
  await waitFor(
    async () => {
      try {
        return ((await (await fetch(`${base}/fleet/status`)).json()) as { ready: number }).ready === 2;
      } catch {
        return false;
      }
    },
    { timeoutMs: 120_000, what: `fleetgate ready (${serve.output()})` },
  );
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120_000 });

  const file = await client.files.create({ file: createReadStream(input), purpose: 'batch' });
  assert.equal(file.bytes, size, 'the whole file stored');
  t.diagnostic(`uploaded; fleetgate peak RSS so far ${(rss.peak() / MB).toFixed(0)} MB`);

  const batch = await client.batches.create({
    input_file_id: file.id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  });
  let progress = '';
  const done = await waitFor(
    async () => {
      const b = await client.batches.retrieve(batch.id);
      assert.notEqual(b.status, 'failed', JSON.stringify(b.errors));
      progress = `${b.status} ${JSON.stringify(b.request_counts)}`;
      return b.status === 'completed' ? b : null;
    },
    { timeoutMs: 240_000, intervalMs: 500, what: 'the job completed' },
  ).catch((error: Error) => {
    throw new Error(`${error.message}; last seen: ${progress}`);
  });
  assert.deepEqual(done.request_counts, { total: COUNT, completed: COUNT, failed: 0 });
  assert.equal(generationRequests(sims), COUNT, 'each request sent once');

  const output = join(dir, 'output.jsonl');
  const answers = await client.files.content(done.output_file_id as string);
  await pipeline(Readable.fromWeb(answers.body as never), createWriteStream(output));
  await assertCompleteOutputStreamed(output, COUNT);

  const back = await client.files.content(file.id);
  let bytes = 0;
  for await (const chunk of Readable.fromWeb(back.body as never)) bytes += (chunk as Buffer).length;
  assert.equal(bytes, size, 'the input downloaded whole');

  const peak = rss.stop();
  t.diagnostic(
    `fleetgate peak RSS ${(peak / MB).toFixed(0)} MB over a ${(size / 2 ** 30).toFixed(2)} GiB upload, job and download`,
  );
  assert.ok(peak > 0 && peak < RSS_BOUND, `fleetgate peak RSS ${(peak / MB).toFixed(0)} MB < 300 MB`);
});
