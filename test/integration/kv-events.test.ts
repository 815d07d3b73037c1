/**
 * KV-event routing over the real wire (issue #55): simulated SGLang engines publish their prefix
 * caches' events on ZeroMQ (127.0.0.1 TCP), fleetgate finds them in `/server_info`, subscribes,
 * keys blocks from the packaged Qwen3 tokenizer's token ids and routes a conversation's next turn
 * where its blocks are. Gaps (replayed, or stale then recovered), an engine restart, and two
 * replicas' agreement.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { validateConfig } from '../../src/config/validate.js';
import { KvEvents } from '../../src/fleet/kv-events/kv-events.js';
import { packagedQwen3Dir } from '../../src/model/chat-model.js';
import { createKvKeys } from '../../src/proxy/kv-request-blocks.js';
import { LeastLoaded } from '../../src/routing/policies/basic-policies.js';
import { createPolicy } from '../../src/routing/policies/create-policy.js';
import { KvAware } from '../../src/routing/policies/kv-aware.js';
import type { SimOptions } from '../../src/sim/index.js';
import { createSims, startGateway } from '../helpers/fleet.js';
import { freePort } from '../helpers/net.js';
import { startShipped } from '../helpers/shipped.js';
import { waitFor } from '../helpers/wait.js';

const MODEL = packagedQwen3Dir();
const SYSTEM = `You are a careful assistant for a fleet of GPUs. ${'Keep answers short and exact. '.repeat(12)}`;

function sim(kv: Partial<NonNullable<SimOptions['kvEvents']>> = {}): Partial<SimOptions> {
  return {
    modelPath: MODEL,
    engine: { tokenMs: 0, pageSize: 16, defaultMaxTokens: 8 },
    timing: { warmupMs: 20 },
    kvEvents: {
      endpoint: 'tcp://127.0.0.1:0',
      topic: 'kv-events',
      replayEndpoint: null,
      bufferSteps: 1000,
      encoding: 'array',
      dropSeqs: null,
      ...kv,
    },
  };
}

interface Answer {
  engine: string;
  content: string;
}

async function chat(url: string, messages: unknown[], maxTokens = 8): Promise<Answer> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'qwen3', messages, max_tokens: maxTokens }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
  return { engine: res.headers.get('x-sim-engine') ?? '', content: body.choices[0].message.content ?? '' };
}

async function fleetStatus(url: string) {
  const res = await fetch(`${url}/fleet/status`);
  return (await res.json()) as { backends: Array<{ name: string; kv_events: { state: string; blocks: number } }> };
}

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? 0 : Number(line.split(' ')[1]);
}

async function startFleet(t: test.TestContext, specs: Array<Partial<SimOptions>>, kvEvents = {}) {
  const sims = await createSims(t, specs);
  for (const s of sims) s.start();
  await Promise.all(sims.map((s) => s.whenReady()));
  const { url, gateway } = await startGateway(t, {
    backends: sims.map((s) => ({ url: s.url, name: s.name })),
    model: { dir: MODEL },
    routing: { policy: 'kv-aware', kv_events: kvEvents },
  });
  await waitFor(async () => (await fleetStatus(url)).backends.every((b) => b.kv_events.state === 'live'), {
    what: 'every backend subscribed',
  });
  return { sims, url, gateway };
}

/** Requests go on without keys until the tokenizer's worker has loaded the model (~1 s): until then, routed as prefix-aware. */
async function untilKeyed(url: string): Promise<void> {
  const unkeyed = () => metric(url, 'fleetgate_kv_unkeyed_total{reason="wait"}');
  await waitFor(async () => {
    const before = await unkeyed();
    await chat(url, [{ role: 'user', content: 'Is the tokenizer up?' }]);
    return (await unkeyed()) === before;
  });
}

describe("kv-aware over the engines' KV events", () => {
  for (const [how, kvEvents] of [
    ['', {}],
    [', keyed on what is known (tokenize_wait 0: nothing waits, new text learned meanwhile)', { tokenize_wait: 0 }],
  ] as const)
    test(`a conversation's next turn goes where its blocks are; /fleet/status shows each stream live with its blocks${how}`, async (t) => {
      const { url } = await startFleet(t, [sim(), sim({ encoding: 'map' }), sim()], kvEvents);
      await untilKeyed(url);
      let followed = 0;
      const conversations: Array<Array<{ role: string; content: string }>> = [];
      for (let c = 0; c < 6; c++) {
        const messages: Array<{ role: string; content: string }> = [
          { role: 'system', content: SYSTEM },
          { role: 'user', content: `Conversation ${c}: ${'describe the rack layout in detail '.repeat(6)}` },
        ];
        const first = await chat(url, messages);
        await waitFor(
          async () => (await fleetStatus(url)).backends.find((b) => b.name === first.engine)?.kv_events.blocks,
          {
            what: "the first turn's blocks in the map",
          },
        );
        const followUp = `And the cooling of ${c}? ${'Which loop feeds which row, and at what flow? '.repeat(8)}`;
        // The client keeps the answer without its thinking, as with a reasoning parser (a <think> block
        // in a message makes the chat one text to the reader).
        const answer = first.content.includes('</think>')
          ? first.content.split('</think>')[1].trim()
          : 'Rows one to four.';
        messages.push({ role: 'assistant', content: answer }, { role: 'user', content: followUp });
        // An answer long enough to fill the page the prompt ends in: the engine publishes it with the answer.
        const second = await chat(url, messages, 32);
        if (second.engine === first.engine) followed++;
        messages.push({ role: 'assistant', content: 'Loop A feeds rows one and two.' });
        conversations.push(messages);
      }
      assert.equal(followed, 6, "every second turn went where its first turn's blocks are");
      // Each second turn's last answer and newest message are learned from the engine that prefilled
      // it (its thinking answer is not in the history, so the prefill stores the history anew from
      // the answer on): the third turns need no tokenizing, so none waits for the tokenizer's worker.
      await waitFor(async () => (await metric(url, 'fleetgate_kv_learned_messages_total')) >= 12, {
        what: "the second turns' answers and follow-ups learned",
      });
      const waits = () => metric(url, 'fleetgate_kv_tokenize_wait_seconds_count');
      const waitedBefore = await waits();
      for (const [c, messages] of conversations.entries()) {
        messages.push({ role: 'user', content: `Thanks. What about row ${c}?` });
        await chat(url, messages);
      }
      assert.equal(await waits(), waitedBefore, 'no third turn waited for the tokenizer');
      if ('tokenize_wait' in kvEvents) {
        assert.equal(await waits(), 0, 'no request waited');
        // Keyed on the messages known (the system prompt, the first turn's message learned meanwhile),
        // not sent on without keys: every turn, the first ones with no block held, went through the map.
        assert.equal(await metric(url, 'fleetgate_kv_unkeyed_total{reason="wait"}'), 0, 'none went on unkeyed');
        const keyed = async (decision: string) => metric(url, `fleetgate_kv_hit_tokens_count{decision="${decision}"}`);
        assert.ok((await keyed('none')) + (await keyed('cache')) >= 18, 'every turn keyed, the first ones too');
      }
      assert.ok((await metric(url, 'fleetgate_kv_events_total')) > 0);
      assert.ok((await metric(url, 'fleetgate_kv_map_blocks')) > 0);
    });

  test("a batch job's unique prompts and a repeated long prompt: each repeat goes where the first one's blocks are", async (t) => {
    const { url } = await startFleet(t, [sim(), sim(), sim()]);
    await untilKeyed(url);
    // The job's prompts: past the shared system prompt, each is tokenized only a head's worth.
    for (let i = 0; i < 4; i++) {
      const unique = `Item ${i}: ${'label the sensor trace by its phase and peak load '.repeat(60)}`;
      await chat(url, [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: unique },
      ]);
    }
    assert.ok((await metric(url, 'fleetgate_kv_untokenized_blocks_total')) > 0, 'the unique parts left untokenized');
    // Group sampling: once an engine holds the whole prompt, its repeats are tokenized whole and follow it.
    const problem = [{ role: 'user', content: `Solve it step by step: ${'a rack draws 12 kW at peak; '.repeat(90)}` }];
    const blocksOf = async (name: string) =>
      (await fleetStatus(url)).backends.find((b) => b.name === name)?.kv_events.blocks ?? 0;
    const before = new Map(
      await Promise.all(['gpu0', 'gpu1', 'gpu2'].map(async (n) => [n, await blocksOf(n)] as const)),
    );
    const first = await chat(url, problem);
    await waitFor(async () => (await blocksOf(first.engine)) >= (before.get(first.engine) ?? 0) + 40, {
      what: "the first sample's blocks in the map",
    });
    const cacheHits = () => metric(url, 'fleetgate_kv_hit_tokens_sum{decision="cache"}');
    const hitsBefore = await cacheHits();
    for (let n = 0; n < 3; n++) assert.equal((await chat(url, problem)).engine, first.engine, `repeat ${n + 1}`);
    const hitTokens = (await cacheHits()) - hitsBefore;
    assert.ok(hitTokens >= 3 * 40 * 16, `the map decided each repeat on its whole prompt (${hitTokens} tokens held)`);
  });

  test('a seq gap is replayed from the replay socket', async (t) => {
    const port = await freePort();
    const { url } = await startFleet(t, [sim({ replayEndpoint: `tcp://127.0.0.1:${port}`, dropSeqs: [1, 2] })], {
      replay_endpoint: `tcp://{host}:${port}`,
    });
    for (let i = 0; i < 4; i++) {
      await chat(url, [{ role: 'user', content: `Prompt ${i}: ${'a long enough question about GPUs '.repeat(5)}` }]);
    }
    await waitFor(async () => (await metric(url, 'fleetgate_kv_event_replays_total')) >= 1, { what: 'a replay' });
    assert.equal(await metric(url, 'fleetgate_kv_event_replay_failures_total'), 0);
    assert.equal((await fleetStatus(url)).backends[0].kv_events.state, 'live');
  });

  test('a gap with no replay socket marks the map stale, and it recovers', async (t) => {
    const { url } = await startFleet(t, [sim({ dropSeqs: [1, 2] })], { stale_for: '400ms' });
    for (let i = 0; i < 4; i++) {
      await chat(url, [{ role: 'user', content: `Prompt ${i}: ${'a long enough question about GPUs '.repeat(5)}` }]);
    }
    await waitFor(async () => (await fleetStatus(url)).backends[0].kv_events.state === 'stale', { what: 'stale' });
    assert.ok((await metric(url, 'fleetgate_kv_event_gaps_total')) >= 1);
    await waitFor(async () => (await fleetStatus(url)).backends[0].kv_events.state === 'live', {
      what: 'live again',
      timeoutMs: 5_000,
    });
  });

  test('an engine restart drops its map: seen in its seqs back at 0, or at once when it leaves ready', async (t) => {
    const port = await freePort();
    const { url, sims, gateway } = await startFleet(t, [sim({ endpoint: `tcp://127.0.0.1:${port}` })]);
    const ask = (what: string) =>
      chat(url, [{ role: 'user', content: `${what}: ${'a long question about GPUs '.repeat(8)}` }]);
    await ask('Before');
    await waitFor(async () => (await fleetStatus(url)).backends[0].kv_events.blocks > 0, { what: 'blocks' });
    const held = (await fleetStatus(url)).backends[0].kv_events.blocks;
    await sims[0].restart();
    await sims[0].whenReady();
    await ask('After');
    // The same number of blocks as before, not twice: the old engine's went with it.
    const after = await waitFor(
      async () => {
        const kv = (await fleetStatus(url)).backends[0].kv_events;
        return kv.state === 'live' && kv.blocks === held ? kv : null;
      },
      { what: `only the new engine's ${held} blocks` },
    );
    assert.equal(after.blocks, held);
    // Ejected, down or removed: the map goes at once, with the transition.
    gateway.fleet.registry.remove('gpu0');
    assert.deepEqual((await fleetStatus(url)).backends.length, 0);
    assert.equal(gateway.metrics !== undefined, true);
    await waitFor(async () => (await metric(url, 'fleetgate_kv_map_blocks')) === 0, {
      what: 'map emptied',
      timeoutMs: 1000,
    });
  });
});

test('as shipped with kv-aware opted in (warm-up on): /readyz waits for the tokenizer, the first request is keyed, a third turn waits for none', async (t) => {
  const sims = await createSims(t, [sim(), sim()]);
  for (const s of sims) s.start();
  await Promise.all(sims.map((s) => s.whenReady()));
  const backends = sims.map((s) => ({ url: s.url, name: s.name }));
  const { gateway, url } = await startShipped(t, 'shipped', backends, {
    model: { dir: MODEL },
    routing: { policy: 'kv-aware' },
  });
  assert.ok(gateway.config.upstream.warm_up, 'the shipped config warms up');
  await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, { what: 'ready', timeoutMs: 20_000 });
  await waitFor(async () => (await fleetStatus(url)).backends.every((b) => b.kv_events.state === 'live'), {
    what: 'every backend subscribed',
  });
  const messages = [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: `The first request: ${'a question about rack power '.repeat(20)}` },
  ];
  const first = await chat(url, messages);
  assert.equal(await metric(url, 'fleetgate_kv_unkeyed_total{reason="wait"}'), 0, 'keyed, not past tokenize_wait');
  assert.equal(await metric(url, 'fleetgate_kv_tokenize_wait_seconds_count'), 1);
  // Its second turn: the answer (without its thinking, as a reasoning parser gives it) and a follow-up,
  // learned from the engine that prefills it; the third turn needs no tokenizing.
  const answer = first.content.includes('</think>') ? first.content.split('</think>')[1].trim() : 'Rack 12.';
  messages.push(
    { role: 'assistant', content: answer },
    { role: 'user', content: `And its cooling? ${'Which loop feeds it, at what flow? '.repeat(8)}` },
  );
  await chat(url, messages, 32);
  await waitFor(async () => (await metric(url, 'fleetgate_kv_learned_messages_total')) >= 2, {
    what: "the second turn's answer and follow-up learned",
  });
  const waited = await metric(url, 'fleetgate_kv_tokenize_wait_seconds_count');
  messages.push({ role: 'assistant', content: 'Loop A.' }, { role: 'user', content: 'Thanks. And rack 14?' });
  await chat(url, messages);
  assert.equal(await metric(url, 'fleetgate_kv_tokenize_wait_seconds_count'), waited, 'the third turn waited for none');
});

test('two replicas subscribed to the same engines pick the same backend for >= 99% of requests', async (t) => {
  const sims = await createSims(
    t,
    Array.from({ length: 4 }, () => sim()),
  );
  for (const s of sims) s.start();
  await Promise.all(sims.map((s) => s.whenReady()));
  const raw = { backends: sims.map((s) => ({ url: s.url, name: s.name })), model: { dir: MODEL } };
  const { url, gateway } = await startGateway(t, { ...raw, routing: { policy: 'kv-aware' } });
  const other = await startGateway(t, { ...raw, routing: { policy: 'kv-aware' } });
  await waitFor(() => gateway.fleet.registry.ready.length === 4 && other.gateway.fleet.registry.ready.length === 4);
  // Each replica's own view: its registry, its subscriptions, its policy (as its traffic path has them).
  const config = validateConfig({ listen: '127.0.0.1:0', ...raw }, 'test');
  const replicas = [gateway, other.gateway].map((g) => {
    const events = new KvEvents({ config: config.routing.kv_events, registry: g.fleet.registry, log: () => {} });
    events.start();
    t.after(() => events.close());
    const policy = new KvAware(
      { minMatch: 0.3, loadGap: 4, loadRatio: 1.5 },
      events,
      createPolicy('prefix-aware'),
      new LeastLoaded(),
      () => {},
    );
    return { events, policy };
  });
  await waitFor(() => replicas.every((r) => sims.every((s) => r.events.state(s.name) === 'live')));
  const keysOf = createKvKeys({
    model: config.model,
    blockSize: () => 16,
    cacheSize: 1000,
    longestHeld: (keys) => Math.max(0, ...replicas[0].events.leadingRuns(keys).values()),
  });
  assert.ok(keysOf !== null);
  const settled = async () => {
    // Both maps have applied every batch the engines sent (bounded wait; the counts stop moving).
    let last = -1;
    await waitFor(
      () => {
        const [a, b] = replicas.map((r) => r.events.counters.batches);
        const done = a === b && a === last;
        last = a;
        return done;
      },
      { intervalMs: 30 },
    );
  };
  const conversations = Array.from({ length: 10 }, (_, c) => [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: `Conversation ${c}: ${'tell me about rack power budgets '.repeat(4)}` },
  ]);
  let same = 0;
  let total = 0;
  for (let turn = 0; turn < 4; turn++) {
    for (const messages of conversations) {
      await settled();
      const body = { model: 'qwen3', messages };
      const kvKeys = await keysOf('/v1/chat/completions', body);
      const candidates = sims.map((s) => ({ name: s.name, load: 0 }));
      const picks = replicas.map((r) => r.policy.pick(candidates, { kvKeys, key: kvKeys?.[0] }, candidates).name);
      total++;
      if (picks[0] === picks[1]) same++;
      const answer = await chat(url, messages);
      messages.push({ role: 'assistant', content: answer.content }, { role: 'user', content: `Turn ${turn + 2}?` });
    }
  }
  await keysOf.close();
  assert.ok(same / total >= 0.99, `${same}/${total} picks agree`);
});
