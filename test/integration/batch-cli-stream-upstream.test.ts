/**
 * A batch keeps its work through a crash (issue #52 item 5): chat and completions lines go upstream
 * streamed and come back assembled in the shape of the engine's non-streamed answer, field by field
 * the simulator's own (thinking mode included, SGLang and vLLM); and a job (`fleetgate batch`, and
 * the Batch API driven by the openai SDK) whose engine is SIGKILLed mid-job has that engine's in-flight answers resumed on the other engine, not started
 * over: every line once, `fleetgate_stream_resumes_total` > 0, and the tokens the engines generated
 * below what starting over would have cost.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import OpenAI, { toFile } from 'openai';
import { request } from 'undici';
import type { BatchRequest, BatchUrl } from '../../src/batch/batch-input.js';
import { BatchSender } from '../../src/batch/batch-sender.js';
import { packagedQwen3Dir } from '../../src/model/chat-model.js';
import { assertCompleteOutput, batchLine, type OutputLine, readJsonl, tempDir } from '../helpers/batch.js';
import { spawnCli } from '../helpers/cli.js';
import { createSims, startGateway } from '../helpers/fleet.js';
import { metricOf, resumeFleet } from '../helpers/resume-fleet.js';
import { startSimProcess } from '../helpers/sim-process.js';
import { waitFor } from '../helpers/wait.js';

const QWEN3 = packagedQwen3Dir();
const THINK_TOKENS: [number, number] = [24, 24];

async function postJson(url: string, body: object): Promise<Record<string, unknown>> {
  const res = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.equal(res.statusCode, 200);
  return (await res.body.json()) as Record<string, unknown>;
}

/**
 * What the comparison leaves out: the answer's own id and time, SGLang's non-streamed-only
 * `metadata`, and the prefix-cache hit count (the second request of the same prompt hits the cache).
 */
function comparable(body: Record<string, unknown>): Record<string, unknown> {
  const { id: _id, created: _created, metadata: _metadata, ...rest } = body;
  const usage = rest.usage as { prompt_tokens_details?: { cached_tokens?: number } } | undefined;
  if (usage?.prompt_tokens_details) usage.prompt_tokens_details.cached_tokens = 0;
  return rest;
}

const CASES: Array<{ name: string; kind: 'sglang' | 'vllm'; thinking: boolean; url: BatchUrl }> = [
  { name: 'sglang thinking chat', kind: 'sglang', thinking: true, url: '/v1/chat/completions' },
  { name: 'vllm thinking chat', kind: 'vllm', thinking: true, url: '/v1/chat/completions' },
  { name: 'sglang chat', kind: 'sglang', thinking: false, url: '/v1/chat/completions' },
  { name: 'sglang completions', kind: 'sglang', thinking: false, url: '/v1/completions' },
];

for (const c of CASES) {
  test(`the batch path streams upstream and assembles the sim's own non-streamed answer: ${c.name}`, async (t) => {
    const thinking = c.thinking
      ? { modelPath: QWEN3, reasoningParser: 'qwen3' as const, thinkTokens: THINK_TOKENS }
      : {};
    const [sim] = await createSims(t, [{ kind: c.kind, engine: { tokenMs: 1 }, ...thinking }]);
    sim.start();
    await sim.whenReady();
    const { url, gateway } = await startGateway(t, {
      backends: [{ url: sim.url, name: sim.name }],
      kind: c.kind,
      ...(c.thinking ? { model: { dir: QWEN3 } } : {}),
    });
    await waitFor(() => gateway.fleet.registry.ready.length === 1, { what: 'the sim ready' });
    const bodies: Array<Record<string, unknown>> = [];
    sim.on('generation', ({ body }) => bodies.push(body));
    const body =
      c.url === '/v1/chat/completions'
        ? { model: 'default', max_tokens: 40, messages: [{ role: 'user', content: `Why is the sky blue? ${c.name}` }] }
        : { model: 'default', max_tokens: 12, prompt: `Once upon a time (${c.name})` };

    const direct = await postJson(`${sim.url}${c.url}`, body);
    const sender = new BatchSender({
      base: new URL(`${url}/`),
      priorityClass: null,
      apiKey: null,
      timeoutMs: 30_000,
      connections: 4,
    });
    t.after(() => sender.close());
    const line: BatchRequest = { custom_id: 'a', url: c.url, body: Buffer.from(JSON.stringify(body)), line: 1 };
    const outcome = await sender.send(line, new AbortController().signal);
    assert.equal(outcome.kind, 'answer', JSON.stringify(outcome));
    assert.ok(outcome.kind === 'answer');
    assert.equal(sender.streamed, 1, 'counted as streamed upstream');
    assert.equal(bodies.at(-1)?.stream, true, 'the engine got a streamed request');
    assert.deepEqual(comparable(outcome.body as Record<string, unknown>), comparable(direct));
    if (c.thinking) {
      const [choice] = (outcome.body as { choices: Array<{ message: Record<string, unknown> }> }).choices;
      const field = c.kind === 'vllm' ? 'reasoning' : 'reasoning_content';
      assert.ok(typeof choice.message[field] === 'string' && choice.message[field] !== '', `${field} assembled`);
    }
    assert.equal(outcome.tokens, (direct.usage as { completion_tokens: number }).completion_tokens);

    const off = new BatchSender({
      base: new URL(`${url}/`),
      priorityClass: null,
      apiKey: null,
      timeoutMs: 30_000,
      connections: 4,
      streamUpstream: false,
    });
    t.after(() => off.close());
    const plain = await off.send(line, new AbortController().signal);
    assert.equal(plain.kind, 'answer');
    assert.equal(off.streamed, 0);
    assert.equal(bodies.at(-1)?.stream, undefined, 'switched off: sent as the line wrote it');
  });
}

/** `sglang:generation_tokens_total` of a sim's `/metrics`. */
async function generatedBy(url: string): Promise<number> {
  const res = await request(`${url}/metrics`);
  const text = await res.body.text();
  const match = /^sglang:generation_tokens_total(?:\{[^}]*\})? (\S+)$/m.exec(text);
  return match ? Number(match[1]) : 0;
}

const CRASH_LINES = 16;

/**
 * gpu0 (a thinking sim process) alone ready, the spare down; `run` starts a job of CRASH_LINES chats
 * through fleetgate (its `batch` config section from `batch`) and resolves to its output lines once
 * done. gpu0 is SIGKILLed when every line is twenty tokens into its answer, the spare admitted first:
 * every line once, reasoning kept, the killed engine's streams resumed and the engines' tokens below
 * what starting over would cost.
 */
async function crashMidJob(
  t: TestContext,
  batch: object,
  run: (url: string, input: string, dir: string) => { done: Promise<OutputLine[]> },
): Promise<void> {
  const simFlags = ['--model-path', QWEN3, '--reasoning-parser', 'qwen3', '--think-tokens', '24-24'];
  const dying = await startSimProcess(t, 'gpu0', [...simFlags, '--token-ms', '60']);
  const fleet = await resumeFleet(
    t,
    dying,
    { model: { dir: QWEN3 }, log: { access: false }, batch },
    { modelPath: QWEN3, reasoningParser: 'qwen3', thinkTokens: THINK_TOKENS },
  );
  const dir = tempDir(t);
  const input = join(dir, 'input.jsonl');
  const lines = Array.from({ length: CRASH_LINES }, (_, i) =>
    batchLine(`req-${i}`, '/v1/chat/completions', {
      model: 'default',
      max_tokens: 72,
      messages: [{ role: 'user', content: `Why is the sky blue? (${i})` }],
    }),
  );
  writeFileSync(input, `${lines.join('\n')}\n`);
  const before = await generatedBy(dying.url);
  const job = run(fleet.url, input, dir);
  // Every line in flight on gpu0 (the spare is down) and well into its answer.
  await waitFor(async () => (await generatedBy(dying.url)) - before >= CRASH_LINES * 20, {
    timeoutMs: 60_000,
    intervalMs: 50,
    what: 'gpu0 twenty tokens into each answer',
  });
  await fleet.admitSpare();
  const lost = (await generatedBy(dying.url)) - before;
  await dying.kill();
  const out = await job.done;

  assertCompleteOutput(out, CRASH_LINES);
  const inOutput = out.reduce(
    (sum, l) => sum + ((l.response?.body?.usage as { completion_tokens?: number } | undefined)?.completion_tokens ?? 0),
    0,
  );
  for (const l of out) {
    const message = (l.response!.body as unknown as { choices: Array<{ message: Record<string, unknown> }> }).choices[0]
      .message;
    assert.ok(typeof message.reasoning_content === 'string' && message.reasoning_content !== '', 'reasoning kept');
  }
  const resumes = await metricOf(fleet.gateway, 'fleetgate_stream_resumes_total', { backend: 'gpu0', reason: 'reset' });
  const spare = fleet.spare.counters.generatedTokens;
  const generated = lost + spare;
  const restart = inOutput + lost;
  process.stderr.write(
    `batch kill: ${CRASH_LINES} lines, ${resumes} resumed; tokens in the output ${inOutput}, generated by the engines ${generated} (gpu0 ${lost} before its kill, spare ${spare}); starting over would be ${restart}\n`,
  );
  assert.ok(resumes > 0, 'the killed engine’s streams were resumed');
  assert.ok(spare < inOutput, `the spare generated only the rest (${spare} < ${inOutput})`);
  assert.ok(generated < restart, `${generated} generated < ${restart} starting over`);
}

test('fleetgate batch, its engine SIGKILLed mid-job: every line once, the in-flight answers resumed, not restarted', async (t) => {
  await crashMidJob(t, {}, (url, input, dir) => {
    const output = join(dir, 'output.jsonl');
    const run = spawnCli(['batch', input, '-o', output, '--url', url, '--concurrency', String(CRASH_LINES)]);
    t.after(() => run.child.kill('SIGKILL'));
    const done = run.closed.then((code) => {
      assert.equal(code, 0, run.output());
      return readJsonl(output);
    });
    return { done };
  });
});

test('the Batch API, its engine SIGKILLed mid-job: every line once, the in-flight answers resumed, not restarted', async (t) => {
  await crashMidJob(t, { dir: join(tempDir(t), 'batches') }, (url, input) => {
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const done = (async () => {
      const file = await client.files.create({
        file: await toFile(readFileSync(input), 'input.jsonl'),
        purpose: 'batch',
      });
      const job = await client.batches.create({
        input_file_id: file.id,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
      });
      const finished = await waitFor(
        async () => {
          const now = await client.batches.retrieve(job.id);
          return now.status === 'completed' || now.status === 'failed' ? now : null;
        },
        { timeoutMs: 90_000, intervalMs: 200, what: 'the batch completed' },
      );
      assert.equal(finished.status, 'completed');
      assert.equal(finished.request_counts?.failed, 0);
      const text = await (await client.files.content(finished.output_file_id as string)).text();
      return text
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as OutputLine);
    })();
    return { done };
  });
});
