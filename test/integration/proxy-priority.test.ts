/**
 * Priority classes end to end, over real TCP against a simulated SGLang server: under a batch flood
 * held in fleetgate's queue at the backend's cap, an interactive request goes to the backend before
 * batch requests that arrived earlier; an unknown class is a 400; a class over its own limit is a 429.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { startReadyFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

/** One request at a time at the backend, so that the order it sees is the order fleetgate dispatched in. */
const CAP = 1;
/** Slow enough that the flood is still queued when the interactive request arrives. */
const ENGINE = { tokenMs: 20, maxRunningRequests: 32 };

function send(url: string, path: string, headers: Record<string, string> = {}) {
  const body =
    path === '/generate'
      ? { text: 'batch prompt', sampling_params: { max_new_tokens: 20 } }
      : { messages: [{ role: 'user', content: 'quick question' }], max_tokens: 8 };
  return request(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  }).then(async (res) => ({ status: res.statusCode, headers: res.headers, body: await res.body.text() }));
}

test('under a batch flood, an interactive request is dispatched before batch requests that arrived earlier', async (t) => {
  const { url, gateway, sims } = await startReadyFleet(t, [{ engine: ENGINE }], {
    routing: { max_inflight_per_backend: CAP },
  });
  // The simulator sees requests in the order fleetgate dispatches them; batch ones use /generate.
  const arrivals: string[] = [];
  sims[0].on('request', ({ path }: { path: string }) => {
    if (path === '/generate' || path === '/v1/chat/completions') arrivals.push(path);
  });

  const batch = Array.from({ length: 6 }, () => send(url, '/generate'));
  await waitFor(() => gateway.queue.waitingIn('batch') === 6 - CAP, { what: 'the flood queued at the cap' });
  const interactive = send(url, '/v1/chat/completions', { 'x-fleetgate-priority': 'interactive' });
  await waitFor(() => gateway.queue.waitingIn('interactive') === 1, { what: 'the interactive request queued' });
  // Batch requests already sent on when it joined the queue; every other one was waiting before it.
  const dispatchedBefore = arrivals.length;
  assert.ok(gateway.queue.waitingIn('batch') > 0, 'batch requests are still waiting');

  const answers = await Promise.all([interactive, ...batch]);
  for (const answer of answers) assert.equal(answer.status, 200, answer.body);
  assert.equal(arrivals.length, 7);
  assert.equal(
    arrivals.indexOf('/v1/chat/completions'),
    dispatchedBefore,
    `the interactive request went first of all those waiting (arrival order: ${arrivals.join(' ')})`,
  );
});

test('an unknown class is answered 400 naming the known classes, without reaching a backend', async (t) => {
  const { url, sims } = await startReadyFleet(t, [{}]);
  const before = sims[0].counters.requests;
  const res = await send(url, '/v1/chat/completions', { 'x-fleetgate-priority': 'urgent' });
  assert.equal(res.status, 400);
  const error = JSON.parse(res.body).error;
  assert.equal(error.type, 'invalid_request_error');
  assert.equal(error.code, 400);
  assert.match(error.message, /unknown priority class "urgent".*interactive, batch/);
  assert.equal(sims[0].counters.requests, before);
});

test('a class over its own max_waiting gets 429 with Retry-After while other classes still queue', async (t) => {
  const { url, gateway } = await startReadyFleet(t, [{ engine: ENGINE }], {
    routing: { max_inflight_per_backend: 1 },
    queue: { classes: [{ name: 'interactive', max_waiting: 0 }, 'batch'] },
  });
  const running = send(url, '/generate');
  await waitFor(() => gateway.fleet.registry.ready[0].inflight === 1, { what: 'the slot taken' });
  const queued = send(url, '/generate');
  await waitFor(() => gateway.queue.waitingIn('batch') === 1, { what: 'a batch request queued' });
  const refused = await send(url, '/v1/chat/completions', { 'x-fleetgate-priority': 'interactive' });
  assert.equal(refused.status, 429, refused.body);
  assert.ok(Number(refused.headers['retry-after']) >= 1, 'Retry-After is set');
  const error = JSON.parse(refused.body).error;
  assert.equal(error.code, 429);
  assert.match(error.message, /class "interactive"/);
  assert.equal((await running).status, 200);
  assert.equal((await queued).status, 200);
  const metrics = await (await request(`${url}/metrics`)).body.text();
  assert.match(metrics, /fleetgate_queue_rejected_total\{reason="queue_full",class="interactive"\} 1/);
});
