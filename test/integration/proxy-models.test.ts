/** Several models behind one URL: each request goes to the backends serving the model it names. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI, { NotFoundError } from 'openai';
import type { SimServer } from '../../src/sim/index.js';
import { SimServer as Sim } from '../../src/sim/index.js';
import { backendsFor, createSims, startGateway } from '../helpers/fleet.js';
import { sampleValue } from '../helpers/prometheus-text.js';
import { waitFor } from '../helpers/wait.js';

const MODEL_A = 'org/model-a';
const MODEL_B = 'org/model-b';

/** 3 backends serving A, 2 serving B, all ready, fleetgate in front. */
async function twoModelFleet(t: { after(fn: () => unknown): void }, raw: Record<string, unknown> = {}) {
  const specs = [MODEL_A, MODEL_A, MODEL_A, MODEL_B, MODEL_B].map((model) => ({ model }));
  const sims = await createSims(t, specs);
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady()));
  const running = await startGateway(t, { backends: backendsFor(sims), health: { starting_interval: '50ms' }, ...raw });
  await waitFor(() => running.gateway.fleet.registry.ready.length === sims.length, { what: 'every backend ready' });
  await waitFor(() => running.gateway.models.byModel, { what: 'both models read' });
  const client = new OpenAI({ baseURL: `${running.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  return { ...running, sims, client, a: sims.slice(0, 3), b: sims.slice(3) };
}

const chat = (client: OpenAI, model: string, maxTokens = 4) =>
  client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens });

const served = (sims: SimServer[]) => sims.map((sim) => sim.counters.requests);

test("each model's requests reach only its backends, in even shares per model (round-robin per model)", async (t) => {
  const { client, a, b } = await twoModelFleet(t, { routing: { policy: 'round-robin' } });
  const before = [...served(a), ...served(b)];
  // Interleaved: a cursor shared across models would give A's backends 5/4/3 and B's 6/2.
  for (let i = 0; i < 12; i++) {
    const answer = await chat(client, i % 2 === 0 ? MODEL_A : MODEL_B);
    assert.equal(answer.model, i % 2 === 0 ? MODEL_A : MODEL_B);
  }
  const after = [...served(a), ...served(b)].map((n, i) => n - before[i]);
  assert.deepEqual(after, [2, 2, 2, 3, 3]);
});

test('a model is matched by its last path segments, as expect_model is', async (t) => {
  const { client, b } = await twoModelFleet(t);
  const before = served(b).reduce((x, y) => x + y);
  await chat(client, 'model-b');
  assert.equal(
    served(b).reduce((x, y) => x + y),
    before + 1,
  );
});

test('GET /v1/models lists every model the ready backends serve, answered by fleetgate', async (t) => {
  const { client, sims } = await twoModelFleet(t);
  const before = served(sims).reduce((x, y) => x + y);
  const ids = [];
  for await (const model of client.models.list()) ids.push(model.id);
  assert.deepEqual(ids, [MODEL_A, MODEL_B]);
  assert.equal(
    served(sims).reduce((x, y) => x + y),
    before,
    'no backend was asked',
  );
});

test('an unknown model gets 404 model_not_found listing the served models; no model at all gets 400', async (t) => {
  const { client, url } = await twoModelFleet(t);
  await assert.rejects(chat(client, 'org/nope'), (error: unknown) => {
    assert.ok(error instanceof NotFoundError);
    assert.equal(error.status, 404);
    assert.match(error.message, /"org\/nope" is not served here; served models: org\/model-a, org\/model-b/);
    return true;
  });
  const res = await fetch(`${url}/generate`, { method: 'POST', body: JSON.stringify({ text: 'hi' }) });
  assert.equal(res.status, 400);
  const body = (await res.json()) as { error: { message: string } };
  assert.match(body.error.message, /serves several models .*name one in "model", or set default_model/);
});

test('default_model serves requests that name none; an alias stands for its served name', async (t) => {
  const { client, url, a, b } = await twoModelFleet(t, { default_model: MODEL_B, models: { fast: MODEL_A } });
  const [beforeA, beforeB] = [served(a), served(b)].map((n) => n.reduce((x, y) => x + y));
  const res = await fetch(`${url}/generate`, {
    method: 'POST',
    body: JSON.stringify({ text: 'hi', sampling_params: { max_new_tokens: 2 } }),
  });
  assert.equal(res.status, 200);
  await chat(client, 'fast');
  assert.equal(
    served(a).reduce((x, y) => x + y),
    beforeA + 1,
  );
  assert.equal(
    served(b).reduce((x, y) => x + y),
    beforeB + 1,
  );
});

test("a flood of model A held at the caps does not delay model B's requests", async (t) => {
  const { client, gateway } = await twoModelFleet(t, {
    routing: { max_inflight_per_backend: 1 },
    queue: { timeout: '60s' },
  });
  const latencyOfB = async () => {
    const started = performance.now();
    for (let i = 0; i < 4; i++) await chat(client, MODEL_B);
    return (performance.now() - started) / 4;
  };
  const idle = await latencyOfB();
  // 30 long A requests on 3 backends capped at 1 each: ~27 wait in A's queue for several seconds.
  const flood = Array.from({ length: 30 }, () => chat(client, MODEL_A, 150));
  await waitFor(() => (gateway.queue.waitingByModel().get(MODEL_A) ?? 0) >= 20, { what: "A's flood to queue" });
  const flooded = await latencyOfB();
  const stillWaiting = gateway.queue.waitingByModel().get(MODEL_A) ?? 0;
  await Promise.all(flood);
  t.diagnostic(`model B latency: ${idle.toFixed(1)} ms idle, ${flooded.toFixed(1)} ms during A's flood`);
  assert.ok(stillWaiting > 0, "A's flood was still queued while B was served");
  assert.ok(flooded < idle * 3 + 50, `B: ${flooded.toFixed(1)} ms during the flood against ${idle.toFixed(1)} ms idle`);
});

test("one model's backends all down: its requests wait, then 503, while the other model serves", async (t) => {
  const { client, gateway, url, b } = await twoModelFleet(t, {
    queue: { timeout: '300ms' },
    health: { interval: '100ms', starting_interval: '50ms', fall: 1 },
  });
  await Promise.all(b.map((sim) => sim.stop()));
  await waitFor(() => gateway.fleet.registry.readyServing(MODEL_B).length === 0, { what: 'B backends out' });
  const started = performance.now();
  await assert.rejects(chat(client, MODEL_B), (error: unknown) => {
    assert.equal((error as { status?: number }).status, 503);
    return true;
  });
  assert.ok(performance.now() - started >= 280, 'held for the queue timeout first');
  await chat(client, MODEL_A);
  assert.deepEqual(gateway.models.known, [MODEL_A, MODEL_B], 'B stays a known model while its backends are down');
  const text = await (await fetch(`${url}/metrics`)).text();
  assert.equal(sampleValue(text, 'fleetgate_model_ready_backends', { model: MODEL_A }), 3);
  assert.equal(sampleValue(text, 'fleetgate_model_ready_backends', { model: MODEL_B }), 0);
  assert.equal(sampleValue(text, 'fleetgate_backend_model_info', { backend: 'gpu3', model: MODEL_B }), 1);
  assert.equal(sampleValue(text, 'fleetgate_model_queue_waiting_requests', { model: MODEL_B }), 0);
});

test("a backend restarted with another model moves to that model's pool", async (t) => {
  // Round-robin: least-loaded would rightly prefer backends already read to have idle slots.
  const { client, gateway, a } = await twoModelFleet(t, {
    health: { interval: '100ms', starting_interval: '50ms', fall: 1 },
    routing: { policy: 'round-robin' },
  });
  const moved = a[2];
  await moved.stop();
  const replacement = new Sim({ port: moved.port, name: moved.name, model: MODEL_B });
  t.after(() => replacement.stop());
  replacement.start();
  await waitFor(
    () =>
      gateway.fleet.registry.get(moved.name)?.model === MODEL_B &&
      gateway.fleet.registry.readyServing(MODEL_B).length === 3,
    {
      what: 'the backend re-read as serving B',
      timeoutMs: 30_000,
    },
  );
  for (let i = 0; i < 6; i++) await chat(client, MODEL_B);
  assert.ok(replacement.counters.requests >= 1, 'the moved backend takes B requests');
  for (let i = 0; i < 6; i++) await chat(client, MODEL_A);
  assert.equal(replacement.counters.requests < 7, true);
  const aServed = served(a.slice(0, 2)).reduce((x, y) => x + y);
  assert.ok(aServed >= 6, 'A requests went to the two remaining A backends');
});
