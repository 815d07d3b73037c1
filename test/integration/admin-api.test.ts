/**
 * The admin API's verbs against a live fleet: add (and the new backend goes through the readiness
 * gate and gets traffic), drain, resume, delete; bad bodies get a 400 naming what is wrong, unknown
 * names 404, duplicates 409. Errors are OpenAI-style JSON.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { backendsFor, createSims, startGateway, stateOf } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

interface Answer {
  status: number;
  body: Record<string, unknown> & { error?: { message: string; type: string; code: number } };
}

async function call(url: string, method: 'POST' | 'DELETE', path: string, body?: unknown): Promise<Answer> {
  const res = await request(`${url}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.statusCode, body: (await res.body.json()) as Answer['body'] };
}

const generate = (url: string) =>
  request(`${url}/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ text: 'hi', sampling_params: { max_new_tokens: 2 } }),
  }).then(async (res) => ({ status: res.statusCode, body: await res.body.text() }));

const fastHealth = { starting_interval: '50ms', interval: '200ms' };

test('POST /fleet/backends adds a backend: 201 with its status, through the readiness gate, then traffic', async (t) => {
  const [first, second] = await createSims(t, [{}, { timing: { startDelayMs: 300 } }]);
  first.start();
  await first.whenReady();
  const { url, gateway } = await startGateway(t, { backends: backendsFor([first]), health: fastHealth });
  await waitFor(() => gateway.fleet.registry.ready.length === 1, { what: 'first ready' });

  second.start();
  const added = await call(url, 'POST', '/fleet/backends', { url: second.url, name: 'gpu-new', kind: 'sglang' });
  assert.equal(added.status, 201);
  assert.equal(added.body.name, 'gpu-new');
  assert.equal(added.body.url, second.url);
  assert.equal(added.body.kind, 'sglang');
  assert.notEqual(added.body.state, 'ready', 'a new backend is not ready before it passed the checks');

  await waitFor(() => stateOf(gateway, 'gpu-new') === 'ready', { what: 'the added backend ready' });
  assert.equal(second.counters.requestsWhileNotReady, 0, 'no traffic before ready');
  await waitFor(
    async () => {
      assert.equal((await generate(url)).status, 200);
      return second.counters.requests > 0;
    },
    { what: 'traffic reaching the added backend' },
  );

  const listed = (await request(`${url}/fleet/status`).then((res) => res.body.json())) as {
    backends: { name: string }[];
  };
  assert.deepEqual(
    listed.backends.map((b) => b.name),
    [first.name, 'gpu-new'],
  );
});

test('bad bodies: 400 with what is wrong; duplicates 409; nothing is added', async (t) => {
  const [sim] = await createSims(t, [{}]);
  const { url, gateway } = await startGateway(t, { backends: backendsFor([sim]) });

  const cases: Array<[unknown, RegExp]> = [
    [{}, /required property 'url'/],
    [{ url: 42 }, /url.*not an http\(s\) URL/],
    [{ url: 'ftp://10.0.0.1:21' }, /body\.url: "ftp:\/\/10\.0\.0\.1:21" is not an http\(s\) URL/],
    [{ url: 'http://10.0.0.1' }, /body\.url: .* has no port/],
    [{ url: 'http://user:pw@10.0.0.1:30000' }, /must not contain credentials/],
    [{ url: 'http://10.0.0.1:30000', kind: 'tgi' }, /kind must be equal to one of the allowed values/],
    [{ url: 'http://10.0.0.1:30000', nmae: 'x' }, /body\.nmae: unknown key \(did you mean "name"\?\)/],
    [{ url: 'http://10.0.0.1:30000', name: 'a b' }, /body\.name: .* must not contain "\/" or whitespace/],
    [['http://10.0.0.1:30000'], /body must be object/],
    ['{"url": ', /not valid JSON/],
  ];
  for (const [body, message] of cases) {
    const answer = await call(url, 'POST', '/fleet/backends', body);
    assert.equal(answer.status, 400, `${JSON.stringify(body)} -> ${JSON.stringify(answer.body)}`);
    assert.equal(answer.body.error?.type, 'invalid_request_error');
    assert.equal(answer.body.error?.code, 400);
    assert.match(answer.body.error?.message ?? '', message);
  }

  const sameName = await call(url, 'POST', '/fleet/backends', { url: 'http://10.0.0.1:30000', name: sim.name });
  assert.equal(sameName.status, 409);
  assert.match(sameName.body.error?.message ?? '', new RegExp(`backend "${sim.name}" already exists`));
  const sameUrl = await call(url, 'POST', '/fleet/backends', { url: sim.url, name: 'other' });
  assert.equal(sameUrl.status, 409);
  assert.match(sameUrl.body.error?.message ?? '', /is already backend/);
  // The same URL written differently (no explicit default port here, but a trailing path) is the same origin.
  const sameOrigin = await call(url, 'POST', '/fleet/backends', { url: `${sim.url}/v1`, name: 'other' });
  assert.equal(sameOrigin.status, 409);

  assert.equal(gateway.fleet.registry.size, 1, 'nothing was added');
});

test('drain, resume, delete: status codes and their effect; unknown names are 404', async (t) => {
  const sims = await createSims(t, [{}, {}]);
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady()));
  const { url, gateway } = await startGateway(t, { backends: backendsFor(sims), health: fastHealth });
  const registry = gateway.fleet.registry;
  await waitFor(() => registry.ready.length === 2, { what: 'both ready' });
  const [kept, drained] = sims;

  const drain = await call(url, 'POST', `/fleet/backends/${drained.name}/drain`);
  assert.equal(drain.status, 200);
  assert.equal(drain.body.state, 'draining');
  assert.equal(drain.body.reason, 'drained by operator');
  const before = drained.counters.requests;
  for (let i = 0; i < 10; i++) assert.equal((await generate(url)).status, 200);
  assert.equal(drained.counters.requests, before, 'a drained backend gets nothing new');
  assert.ok(kept.counters.requests >= 10);

  const resume = await call(url, 'POST', `/fleet/backends/${drained.name}/resume`);
  assert.equal(resume.status, 200);
  await waitFor(() => stateOf(gateway, drained.name) === 'ready', { what: 'ready again after resume' });

  const removed = await call(url, 'DELETE', `/fleet/backends/${drained.name}`);
  assert.equal(removed.status, 202);
  assert.equal(removed.body.removed, true, 'idle: removed at once');
  assert.equal(registry.get(drained.name), undefined);
  assert.equal(registry.size, 1);
  assert.equal((await generate(url)).status, 200, 'the rest of the fleet keeps serving');

  for (const [method, path] of [
    ['DELETE', `/fleet/backends/${drained.name}`],
    ['POST', '/fleet/backends/nope/drain'],
    ['POST', '/fleet/backends/nope/resume'],
  ] as const) {
    const answer = await call(url, method, path);
    assert.equal(answer.status, 404, `${method} ${path}`);
    assert.equal(answer.body.error?.type, 'not_found_error');
    assert.match(answer.body.error?.message ?? '', /no backend named/);
  }
});

test('a bad drain deadline is 400 naming what is wrong, and nothing is drained or removed', async (t) => {
  const [sim] = await createSims(t, [{}]);
  sim.start();
  await sim.whenReady();
  const { url, gateway } = await startGateway(t, { backends: backendsFor([sim]), health: fastHealth });
  await waitFor(() => gateway.fleet.registry.ready.length === 1, { what: 'ready' });
  const drain = `/fleet/backends/${sim.name}/drain`;
  const remove = `/fleet/backends/${sim.name}`;
  for (const [method, path, body, problem] of [
    [
      'POST',
      `${drain}?deadline=soon`,
      undefined,
      /^deadline: "soon" is not a duration \(e\.g\. 500ms, 10s\); 0 = no deadline$/,
    ],
    ['POST', `${drain}?deadline=10`, undefined, /^deadline: "10" is not a duration/],
    ['POST', drain, { deadline: 10 }, /^deadline: 10 has no unit/],
    ['POST', drain, { deadline: '-1s' }, /^deadline: "-1s" is not a duration/],
    ['POST', drain, { deadlin: '1s' }, /unknown key "deadlin" in the body/],
    ['POST', `${drain}?deadline=1s`, { deadline: '2s' }, /give the deadline once/],
    ['DELETE', `${remove}?deadline=1x`, undefined, /^deadline: "1x" is not a duration/],
    ['DELETE', remove, ['1s'], /the body must be a JSON object/],
  ] as const) {
    const answer = await call(url, method, path, body);
    assert.equal(answer.status, 400, `${method} ${path} ${JSON.stringify(body)}`);
    assert.equal(answer.body.error?.type, 'invalid_request_error');
    assert.match(answer.body.error?.message ?? '', problem);
  }
  assert.equal(stateOf(gateway, sim.name), 'ready', 'a refused call drains nothing');
  assert.equal(gateway.fleet.registry.size, 1, 'and removes nothing');

  const good = await call(url, 'POST', drain, { deadline: '1.5s' });
  assert.equal(good.status, 200);
  assert.equal(good.body.drain_deadline, '1.5s');
  const backend = gateway.fleet.registry.get(sim.name)!;
  assert.equal(gateway.fleet.drains.deadlineOf(backend), 1_500);
  assert.equal((await call(url, 'POST', `/fleet/backends/${sim.name}/resume`)).status, 200);
  assert.equal(gateway.fleet.drains.deadlineOf(backend), null, 'a resume cancels the deadline');
});

test('/fleet/... is fleetgate’s own: unknown paths and methods there are 404, never proxied', async (t) => {
  const [sim] = await createSims(t, [{}]);
  sim.start();
  await sim.whenReady();
  const { url, gateway } = await startGateway(t, { backends: backendsFor([sim]) });
  await waitFor(() => gateway.fleet.registry.ready.length === 1, { what: 'ready' });
  for (const [method, path] of [
    ['GET', '/fleet/backends'],
    ['POST', '/fleet/status'],
    ['DELETE', '/fleet/backends'],
    ['GET', '/fleet/nope?x=1'],
  ] as const) {
    const res = await request(`${url}${path}`, { method });
    assert.equal(res.statusCode, 404, `${method} ${path}`);
    const body = (await res.body.json()) as { error: { message: string } };
    assert.match(body.error.message, /is not a fleetgate endpoint/);
  }
  assert.equal(sim.counters.requests, 0, 'nothing reached a backend');
  for (const path of ['/fleet/status', '/fleet']) {
    const res = await request(`${url}${path}`);
    assert.equal(res.statusCode, 200, path);
    await res.body.dump();
  }
});
