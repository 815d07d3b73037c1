/**
 * `queue.classes[].backend_priority` end to end, over real TCP against a simulated SGLang server
 * started with priority scheduling: batch requests already waiting in the backend's own queue (where
 * fleetgate's queue cannot reorder them) do not delay an interactive request, because fleetgate
 * sends its class as the request's `priority`.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { startReadyFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

/** One running slot at the backend, slow steps: everything sent after the first waits in its queue. */
const ENGINE = { tokenMs: 20, maxRunningRequests: 1, priorityScheduling: true };

function send(url: string, path: string, headers: Record<string, string> = {}) {
  const body =
    path === '/generate'
      ? { text: 'batch prompt', sampling_params: { max_new_tokens: 10 } }
      : { messages: [{ role: 'user', content: 'quick question' }], max_tokens: 2 };
  return request(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  }).then(async (res) => ({ status: res.statusCode, body: await res.body.text(), path }));
}

async function finishOrder(t: test.TestContext, backendPriority: boolean): Promise<string[]> {
  const classes = backendPriority
    ? [
        { name: 'interactive', backend_priority: 1 },
        { name: 'batch', backend_priority: 0 },
      ]
    : ['interactive', 'batch'];
  const { url, gateway } = await startReadyFleet(t, [{ engine: ENGINE }], {
    routing: { max_inflight_per_backend: 0 },
    queue: { classes, default_class: 'batch' },
  });
  const finished: string[] = [];
  const track = (p: Promise<{ status: number; body: string; path: string }>) =>
    p.then((answer) => {
      assert.equal(answer.status, 200, answer.body);
      finished.push(answer.path === '/generate' ? 'batch' : 'interactive');
    });
  const backend = gateway.fleet.registry.ready[0];
  const batch = Array.from({ length: 4 }, () => track(send(url, '/generate')));
  await waitFor(() => backend.inflight === 4, { what: 'the batch requests at the backend' });
  const interactive = track(send(url, '/v1/chat/completions', { 'x-fleetgate-priority': 'interactive' }));
  await Promise.all([interactive, ...batch]);
  return finished;
}

test('with backend_priority, an interactive request overtakes batch requests queued inside the backend', async (t) => {
  const order = await finishOrder(t, true);
  assert.ok(
    order.indexOf('interactive') <= 1,
    `at most the running batch request ends first (order: ${order.join(' ')})`,
  );
});

test('without it, the backend serves its queue first come first served: the interactive request ends last', async (t) => {
  const order = await finishOrder(t, false);
  assert.equal(order.indexOf('interactive'), 4, `order: ${order.join(' ')}`);
});
