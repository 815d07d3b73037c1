/**
 * Features together, as shipped: a stream's continuation keeps its priority class and API key, and
 * its model's pool; a batch job meets a drain deadline; two replicas meet a burst at start under the
 * auto cap. Each fleetgate starts from the shipped config (test/helpers/shipped.ts).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { request } from 'undici';
import { packagedQwen3Dir } from '../../src/model/chat-model.js';
import { expectedThinkingAnswer, type SimOptions } from '../../src/sim/index.js';
import { assertCompleteOutput, generationRequests, readJsonl, tempDir, writeChatInput } from '../helpers/batch.js';
import { spawnCli } from '../helpers/cli.js';
import { createSims, takesOf } from '../helpers/fleet.js';
import { sampleValue } from '../helpers/prometheus-text.js';
import { type Profile, startShipped } from '../helpers/shipped.js';
import { assertWholeStream } from '../helpers/stream-check.js';
import { streamFrom } from '../helpers/streamed-request.js';
import { waitFor } from '../helpers/wait.js';

type T = { after(fn: () => unknown): void };

async function startedSims(t: T, specs: Array<Partial<SimOptions>>) {
  const sims = await createSims(t, specs);
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady()));
  return sims;
}

/**
 * Ready once its start-up warm-up is over (on as shipped): bounded past the warm-up's own 10 s limit,
 * which a loaded machine reaches, most of all with two gateways warming up in one process.
 */
async function readyGateway(t: T, profile: Profile, backends: unknown[], overrides: Record<string, unknown>) {
  const running = await startShipped(t, profile, backends, overrides);
  await waitFor(async () => (await request(`${running.url}/readyz`)).statusCode === 200, {
    what: '/readyz 200',
    timeoutMs: 60_000,
  });
  return running;
}

const MAX_TOKENS = 60;
const streamOf = (model: string) => ({
  model,
  stream: true,
  max_tokens: MAX_TOKENS,
  messages: [{ role: 'user', content: 'Tell me about Paris' }],
});

test('stream resume x priorities: the continuation waits in the class of the original, and is sent with its priority', async (t) => {
  const sims = await startedSims(t, [{ engine: { tokenMs: 20 } }, { engine: { tokenMs: 20 } }]);
  const bodies = sims.map(() => [] as Array<Record<string, unknown>>);
  sims.forEach((sim, i) => {
    sim.on('generation', ({ body }) => bodies[i].push(body));
  });
  const { gateway, url } = await readyGateway(
    t,
    'shipped',
    sims.map((sim) => ({ url: sim.url, name: sim.name })),
    {
      routing: { max_inflight_per_backend: 1 },
      auth: { api_keys: ['sk-app', 'sk-batch'] },
      queue: {
        classes: [
          { name: 'interactive', api_keys: ['sk-app'], backend_priority: 100 },
          { name: 'batch', backend_priority: 0 },
        ],
      },
    },
  );
  const as = (key: string) => ({ authorization: `Bearer ${key}` });
  const interactive = streamFrom(url, '/v1/chat/completions', streamOf('default'), as('sk-app'));
  await interactive.atTokens(1);
  const running = streamFrom(url, '/v1/chat/completions', { ...streamOf('default'), max_tokens: 40 }, as('sk-batch'));
  await running.atTokens(1);
  const waiting = streamFrom(url, '/v1/chat/completions', { ...streamOf('default'), max_tokens: 5 }, as('sk-batch'));
  await waitFor(() => gateway.queue.waiting === 1, { what: 'a batch request waiting' });
  await interactive.atTokens(5);
  const first = bodies.findIndex((b) => b[0]?.priority === 100);
  await sims[first].crash();
  assertWholeStream(await interactive.done, MAX_TOKENS);
  await Promise.all([running.done, waiting.done]);
  const continuation = bodies[1 - first].find((body) => body.continue_final_message === true);
  assert.equal(continuation?.priority, 100, 'sent with its class backend_priority');
  // Waits are observed by class: the continuation waited for the running batch request to end. Had
  // it lost its class, its wait would count as batch's.
  const metrics = await gateway.metrics.render();
  const waits = (cls: string) => sampleValue(metrics, 'fleetgate_queue_wait_seconds_count', { class: cls }) ?? 0;
  assert.equal(waits('interactive'), 1, 'the continuation waited as interactive');
  assert.ok(waits('batch') >= 1, 'the batch request waited as batch');
  const order = bodies[1 - first].map((body) =>
    body.continue_final_message === true ? 'continuation' : body.max_tokens,
  );
  assert.deepEqual(
    order,
    [40, 'continuation', 5],
    'the interactive continuation went before the earlier batch request',
  );
});

test('stream resume x several models: the continuation stays in its model pool', async (t) => {
  const slow = { engine: { tokenMs: 20 } };
  const sims = await startedSims(t, [
    { ...slow, model: 'org/alpha' },
    { ...slow, model: 'org/alpha' },
    { ...slow, model: 'org/beta' },
  ]);
  const { url, gateway } = await readyGateway(
    t,
    'shipped',
    sims.map((sim) => ({ url: sim.url, name: sim.name })),
    {},
  );
  await waitFor(() => gateway.fleet.registry.ready.length === 3, { what: 'all ready' });
  const stream = streamFrom(url, '/v1/chat/completions', streamOf('alpha'));
  await stream.atTokens(5);
  const first = sims[0].counters.requests === 1 ? 0 : 1;
  await sims[first].crash();
  assertWholeStream(await stream.done, MAX_TOKENS);
  assert.equal(sims[1 - first].counters.requests, 1, 'continued on the other alpha backend');
  assert.equal(sims[2].counters.requests, 0, 'beta never served an alpha request');
});

test('stream resume x drain deadline x fleetgate batch: every custom_id once, the drained backend takes nothing new', async (t) => {
  const slow = { engine: { tokenMs: 10, maxRunningRequests: 16 } };
  const sims = await startedSims(t, [slow, slow]);
  const { url, gateway } = await readyGateway(
    t,
    'shipped',
    sims.map((sim) => ({ url: sim.url, name: sim.name })),
    {},
  );
  const dir = tempDir(t);
  const count = 200;
  const input = writeChatInput(dir, count, 60);
  const output = join(dir, 'output.jsonl');
  const run = spawnCli(['batch', input, '-o', output, '--url', url]);
  t.after(() => run.child.kill('SIGKILL'));
  await waitFor(() => sims[0].counters.requests >= 20, { what: 'the job under way', timeoutMs: 30_000 });
  const { registry } = gateway.fleet;
  const gpu0 = registry.get('gpu0');
  const sentAfterDrain = takesOf(registry, gpu0);
  registry.on('transition', ({ backend, to }) => {
    if (backend === gpu0 && to === 'draining') sentAfterDrain.arm();
  });
  const drain = await request(`${url}/fleet/backends/gpu0/drain?deadline=300ms`, { method: 'POST' });
  assert.equal(drain.statusCode, 200);
  const code = await run.closed;
  assert.equal(code, 0, run.output());
  assertCompleteOutput(readJsonl(output), count);
  assert.equal(readJsonl(join(dir, 'output.errors.jsonl')).length, 0, 'no errors');
  assert.equal(sentAfterDrain.count, 0, 'nothing new sent to the drained backend');
  // Those still running on gpu0 300 ms after the drain were ended there and re-sent to gpu1.
  const resent = generationRequests(sims) - count;
  assert.ok(resent >= 1, `re-sent past the deadline: ${resent}`);
  assert.equal(gateway.fleet.registry.get('gpu0')?.state, 'draining');
});

test('replicas x auto cap at start: two replicas burst at once, each backend holds about one cap', async (t) => {
  const engine = { engine: { tokenMs: 10, maxRunningRequests: 8 } };
  const sims = await startedSims(t, [engine, engine]);
  const backends = sims.map((sim) => ({ url: sim.url, name: sim.name }));
  const replicas = await Promise.all([readyGateway(t, 'k8s', backends, {}), readyGateway(t, 'k8s', backends, {})]);
  // The caps learned from each backend's first report (before it, every backend holds the unread cap).
  for (const { gateway } of replicas) {
    await waitFor(() => gateway.fleet.registry.list().every((b) => b.reported !== null && b.cap === 8 + 2), {
      what: 'caps read',
    });
  }
  const streams = replicas.flatMap(({ url }) =>
    Array.from({ length: 24 }, () =>
      streamFrom(url, '/v1/chat/completions', { ...streamOf('default'), max_tokens: 20 }),
    ),
  );
  const answers = await Promise.all(streams.map((s) => s.done));
  assert.ok(answers.every((a) => a.status === 200 && a.done === 1));
  // max_running_requests + 2 each; without the ConfigMap's `routing.replicas: 2` each replica fills a
  // whole cap (a backend then held 20 here, every run). With it, what both replicas had on the wire
  // at a scrape is counted by neither report (docs/replicas.md): a busy machine widens that window,
  // and a backend held up to 16 then. The bound sits between: well under the two caps.
  const cap = 8 + 2;
  for (const sim of sims)
    assert.ok(sim.counters.peakHeld <= cap * 1.7, `${sim.name} held ${sim.counters.peakHeld} at most`);
});

test('token-exact resume x priorities x two cuts, as shipped: a thinking stream cut twice mid-reasoning is whole and keeps its class', async (t) => {
  const thinking = { modelPath: packagedQwen3Dir(), reasoningParser: 'qwen3', thinkTokens: [40, 40] } as const;
  const sims = await startedSims(
    t,
    [0, 1, 2].map(() => ({ engine: { tokenMs: 25 }, ...thinking })),
  );
  const generateBodies: Array<Record<string, unknown>> = [];
  const served: number[] = [];
  sims.forEach((sim, i) => {
    sim.on('generation', ({ body }) => {
      served.push(i);
      if (body.input_ids !== undefined) generateBodies.push(body);
    });
  });
  const { gateway, url } = await readyGateway(
    t,
    'shipped',
    sims.map((sim) => ({ url: sim.url, name: sim.name })),
    {
      model: { dir: thinking.modelPath },
      auth: { api_keys: ['sk-app'] },
      queue: {
        classes: [
          { name: 'interactive', api_keys: ['sk-app'], backend_priority: 100 },
          { name: 'batch', backend_priority: 0 },
        ],
      },
    },
  );
  await waitFor(() => gateway.fleet.registry.ready.length === 3, { what: 'all ready' });
  const messages = [{ role: 'user', content: 'Why is the sky blue, twice cut?' }];
  const body = { model: 'default', stream: true, max_tokens: 80, messages, stream_options: { include_usage: true } };
  const expected = expectedThinkingAnswer({ messages, max_tokens: 80 }, thinking);
  const stream = streamFrom(url, '/v1/chat/completions', body, { authorization: 'Bearer sk-app' });
  const crashServing = () => sims[served[served.length - 1]].crash();
  await stream.atTokens(8);
  await crashServing();
  await waitFor(() => generateBodies.length === 1, { what: 'the first continuation' });
  await stream.atTokens(20);
  await crashServing();
  const got = await stream.done;
  assert.equal(got.status, 200);
  assert.equal(got.comments.length, 2, `two joins: ${got.comments}`);
  const deltaText = (field: string) =>
    got.events
      .map((e) => (e.choices as Array<{ delta?: Record<string, unknown> }> | undefined)?.[0]?.delta?.[field])
      .filter((text) => typeof text === 'string')
      .join('');
  const reasoning = deltaText('reasoning_content');
  const content = deltaText('content');
  assert.equal(reasoning, expected.reasoning, 'the reasoning neither restarts nor repeats across two cuts');
  assert.equal(content, expected.content);
  assert.equal(got.usage?.completion_tokens, expected.completionTokens);
  assert.equal(generateBodies.length, 2, 'both continuations went as token ids');
  assert.ok(
    generateBodies.every((b) => b.priority === 100),
    'each sent with its class backend_priority',
  );
});
