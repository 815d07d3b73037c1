/**
 * The core contract, as users run fleetgate: every test starts it from the shipped
 * config/fleetgate.yaml and again from the shipped Kubernetes ConfigMap's settings (two replicas,
 * no access log, ...), every default on, the start-up warm-up included, overriding only listen,
 * backends and probe timing, plus the one setting a test is about.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import type { SimOptions, SimServer } from '../../src/sim/index.js';
import { chat } from '../helpers/chat-load.js';
import { createSims } from '../helpers/fleet.js';
import { startRawBackend, writeJson } from '../helpers/raw-backend.js';
import { PROFILES, type Profile, startShipped } from '../helpers/shipped.js';
import { assertWholeStream } from '../helpers/stream-check.js';
import { streamFrom } from '../helpers/streamed-request.js';
import { waitFor } from '../helpers/wait.js';

type Raw = Record<string, unknown>;
type T = { after(fn: () => unknown): void };

async function readyFleet(t: T, profile: Profile, specs: Array<Partial<SimOptions>>, overrides: Raw = {}) {
  const sims = await createSims(t, specs);
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady()));
  const running = await startShipped(
    t,
    profile,
    sims.map((sim) => ({ url: sim.url, name: sim.name })),
    overrides,
  );
  await waitFor(async () => (await request(`${running.url}/readyz`)).statusCode === 200, { what: '/readyz 200' });
  return { ...running, sims };
}

const requests = (sims: SimServer[]) => sims.map((sim) => sim.counters.requests);
const stateOf = (
  gateway: { fleet: { registry: { get(name: string): { state: string } | undefined } } },
  name: string,
) => gateway.fleet.registry.get(name)?.state;

async function sequential(url: string, n: number): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < n; i++) statuses.push((await chat(url, 2)).status);
  return statuses;
}

const STREAM = {
  model: 'default',
  stream: true,
  max_tokens: 60,
  messages: [{ role: 'user', content: 'Tell me about Paris' }],
};

for (const profile of PROFILES) {
  test(`${profile}: round-robin splits 30 sequential requests exactly 10/10/10`, async (t) => {
    const { url, sims } = await readyFleet(t, profile, [{}, {}, {}], { routing: { policy: 'round-robin' } });
    assert.deepEqual(await sequential(url, 30), Array(30).fill(200));
    assert.deepEqual(requests(sims), [10, 10, 10]);
  });

  test(`${profile}: least-loaded spreads 12 concurrent streams 4/4/4`, async (t) => {
    const slow = { engine: { tokenMs: 20 } };
    const { url, sims } = await readyFleet(t, profile, [slow, slow, slow]);
    const streams = Array.from({ length: 12 }, () =>
      streamFrom(url, '/v1/chat/completions', { ...STREAM, max_tokens: 20 }),
    );
    const answers = await Promise.all(streams.map((s) => s.done));
    assert.ok(answers.every((a) => a.status === 200));
    assert.deepEqual(requests(sims), [4, 4, 4]);
  });

  test(`${profile}: a drained backend takes no new request`, async (t) => {
    const { gateway, url, sims } = await readyFleet(t, profile, [{}, {}]);
    const res = await request(`${url}/fleet/backends/gpu0/drain`, { method: 'POST' });
    assert.equal(res.statusCode, 200, await res.body.text());
    assert.equal(stateOf(gateway, 'gpu0'), 'draining');
    assert.deepEqual(await sequential(url, 10), Array(10).fill(200));
    assert.deepEqual(requests(sims), [0, 10]);
  });

  for (const fault of ['hangs', 'crashes'] as const) {
    test(`${profile}: a backend that ${fault} gets nothing after its ejection`, async (t) => {
      const { gateway, url, sims } = await readyFleet(t, profile, [{}, {}]);
      if (fault === 'hangs') sims[0].hang();
      else await sims[0].crash();
      await waitFor(() => stateOf(gateway, 'gpu0') !== 'ready', { what: 'gpu0 ejected' });
      const atEjection = sims[0].counters.requests;
      assert.deepEqual(await sequential(url, 10), Array(10).fill(200));
      assert.equal(sims[0].counters.requests, atEjection, 'nothing after the ejection');
      assert.equal(sims[1].counters.requests, 10);
    });
  }

  test(`${profile}: a backend that went down is re-admitted within rise x starting_interval of its recovery`, async (t) => {
    const { gateway, sims } = await readyFleet(t, profile, [{}, {}]);
    await sims[0].stop();
    await waitFor(() => stateOf(gateway, 'gpu0') !== 'ready', { what: 'gpu0 down' });
    sims[0].start();
    await sims[0].whenReady();
    const recovered = performance.now();
    await waitFor(() => stateOf(gateway, 'gpu0') === 'ready', { what: 'gpu0 re-admitted', intervalMs: 5 });
    const { rise, starting_interval: interval } = gateway.config.health;
    const tookMs = performance.now() - recovered;
    // One probe period plus the probe itself; generous slack for a loaded CI machine.
    assert.ok(tookMs <= rise * interval + 500, `re-admitted ${tookMs.toFixed(0)} ms after recovery`);
  });

  test(`${profile}: max_inflight_per_backend 1 serves requests one after another`, async (t) => {
    let open = 0;
    let most = 0;
    const backend = await startRawBackend(t, (socket) => {
      most = Math.max(most, ++open);
      setTimeout(() => {
        open--;
        writeJson(socket, 200, { id: 'c', object: 'chat.completion', choices: [] });
      }, 50);
    });
    const { url } = await startShipped(t, profile, [{ url: backend.url, name: 'one', kind: 'openai' }], {
      routing: { max_inflight_per_backend: 1 },
    });
    const answers = await Promise.all(Array.from({ length: 6 }, () => chat(url, 1)));
    assert.deepEqual(
      answers.map((a) => a.status),
      Array(6).fill(200),
    );
    assert.equal(backend.seen.length, 6);
    assert.equal(most, 1, 'never two at once');
  });

  test(`${profile}: a request abandoned while held is never forwarded`, async (t) => {
    const sims = await createSims(t, [{}]);
    const { gateway, url } = await startShipped(t, profile, [{ url: sims[0].url, name: 'gpu0' }]);
    const abandoned = new AbortController();
    const held = request(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...STREAM, stream: false }),
      signal: abandoned.signal,
    }).catch(() => 'aborted');
    await waitFor(() => gateway.queue.waiting === 1, { what: 'the request held' });
    abandoned.abort();
    assert.equal(await held, 'aborted');
    await waitFor(() => gateway.queue.waiting === 0, { what: 'the held request gone' });
    sims[0].start();
    await waitFor(() => stateOf(gateway, 'gpu0') === 'ready', { what: 'gpu0 ready' });
    assert.equal((await chat(url, 2)).status, 200);
    assert.equal(sims[0].counters.requests, 1, 'only the request that waited');
  });

  test(`${profile}: a stream cut mid-way resumes whole on another backend; with none, it ends with an error event`, async (t) => {
    const slow = { engine: { tokenMs: 20 } };
    const { gateway, url, sims } = await readyFleet(t, profile, [slow, slow], { routing: { policy: 'round-robin' } });
    const resumed = streamFrom(url, '/v1/chat/completions', STREAM);
    await resumed.atTokens(5);
    await sims[0].crash();
    const whole = await resumed.done;
    assert.equal(whole.status, 200);
    assertWholeStream(whole, STREAM.max_tokens);
    await waitFor(() => stateOf(gateway, 'gpu0') !== 'ready', { what: 'gpu0 out' });
    const cut = streamFrom(url, '/v1/chat/completions', STREAM);
    await cut.atTokens(5);
    await sims[1].crash();
    const ended = await cut.done;
    assert.equal(ended.status, 200);
    assert.equal(ended.errors, 1, 'one error event');
    assert.equal(ended.done, 0, 'no [DONE]: never passed off as complete');
  });

  test(`${profile}: with no backend ready a request is held, then served once one is; past queue.timeout, 503`, async (t) => {
    const sims = await createSims(t, [{}]);
    const { gateway, url } = await startShipped(t, profile, [{ url: sims[0].url, name: 'gpu0' }], {
      queue: { timeout: '1s' },
    });
    const started = performance.now();
    const late = await request(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...STREAM, stream: false }),
    });
    const waitedMs = performance.now() - started;
    assert.equal(late.statusCode, 503, await late.body.text());
    assert.ok(late.headers['retry-after'] !== undefined, 'Retry-After');
    assert.ok(waitedMs >= 900, `held ${waitedMs.toFixed(0)} ms first`);
    const held = chat(url, 2);
    await waitFor(() => gateway.queue.waiting === 1, { what: 'held' });
    sims[0].start();
    assert.equal((await held).status, 200, 'served once a backend is ready');
  });
}
