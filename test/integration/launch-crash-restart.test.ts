/**
 * `fleetgate launch` over real `fleetgate sim` processes: an engine killed with SIGKILL is restarted,
 * passes readiness and takes traffic again; the non-streamed requests it had are answered by the other.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { alive, simCommand, startLaunch, waitReady } from '../helpers/launch.js';
import { sampleValue } from '../helpers/prometheus-text.js';
import { waitFor } from '../helpers/wait.js';

async function complete(url: string, maxTokens: number) {
  const res = await fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', prompt: 'hello', max_tokens: maxTokens }),
  });
  return { status: res.status, body: (await res.json()) as { choices?: { text: string }[] } };
}

test('kill -9 of an engine: restarted, ready again, serving; its requests answered by the other engine', async (t) => {
  const fleetgate = await startLaunch(t, {
    engines: 2,
    launch: { command: simCommand('--token-ms 20') },
    config: { routing: { policy: 'round-robin' } },
  });
  await waitReady(fleetgate, 'gpu0');
  await waitReady(fleetgate, 'gpu1');
  const before = await fleetgate.backend('gpu0');
  const oldPid = before.supervision?.pid;
  assert.ok(oldPid, 'status shows the pid');
  assert.equal(before.supervision?.restarts, 0);

  // Non-streamed requests of ~2 s each; round-robin puts some on gpu0.
  const requests = Array.from({ length: 4 }, () => complete(fleetgate.url, 100));
  await waitFor(async () => (await fleetgate.backend('gpu0')).inflight > 0, { what: 'requests on gpu0' });
  process.kill(oldPid, 'SIGKILL');

  const answers = await Promise.all(requests);
  for (const answer of answers) {
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.ok((answer.body.choices?.[0]?.text.length ?? 0) > 0, 'a real completion');
  }

  const after = await waitFor(
    async () => {
      const b = await fleetgate.backend('gpu0');
      return b.state === 'ready' && b.supervision?.restarts === 1 ? b : null;
    },
    { what: 'gpu0 restarted and ready', timeoutMs: 60_000 },
  );
  assert.notEqual(after.supervision?.pid, oldPid, 'a new process');
  assert.ok(after.supervision?.pid && alive(after.supervision.pid));
  assert.deepEqual(after.supervision?.last_exit, { code: null, signal: 'SIGKILL' });

  // Only gpu0 left to take traffic: the restarted engine serves.
  const drain = await fetch(`${fleetgate.url}/fleet/backends/gpu1/drain`, { method: 'POST' });
  assert.equal(drain.status, 200);
  const served = await complete(fleetgate.url, 5);
  assert.equal(served.status, 200);

  const metrics = await (await fetch(`${fleetgate.url}/metrics`)).text();
  assert.equal(sampleValue(metrics, 'fleetgate_backend_restarts_total', { backend: 'gpu0', reason: 'exit' }), 1);
  assert.equal(sampleValue(metrics, 'fleetgate_backend_restarts_total', { backend: 'gpu1', reason: 'exit' }), 0);
  assert.equal(sampleValue(metrics, 'fleetgate_backend_supervised', { backend: 'gpu0' }), 1);
  assert.ok(
    (sampleValue(metrics, 'fleetgate_retries_total', { backend: 'gpu0' }) ?? 0) >= 1,
    'the requests cut on gpu0 were re-sent to gpu1',
  );
  assert.ok(
    (sampleValue(metrics, 'fleetgate_requests_total', { backend: 'gpu0', code: '200' }) ?? 0) >= 1,
    'gpu0 answered after its restart',
  );
});
