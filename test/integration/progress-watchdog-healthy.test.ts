/**
 * The progress watchdog never ejects a healthy slow backend (no `log:` configured): a non-streamed
 * generation silent for several timeouts, a long chunked prefill, and a backend whose own queue
 * holds streams under a flood.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Gateway } from '../../src/app.js';
import { startReadyFleet } from '../helpers/fleet.js';
import { CONFIG, call, PROGRESS_TIMEOUT_MS, transitions } from '../helpers/progress-load.js';
import { waitFor } from '../helpers/wait.js';

async function neverEjected(gateway: Gateway, work: Promise<unknown>) {
  const seen = transitions(gateway);
  await work;
  assert.deepEqual(seen, [], 'no backend left rotation');
}

test('healthy: a non-streamed generation silent for several timeouts is kept while its backend reports tokens', async (t) => {
  const { gateway, url } = await startReadyFleet(t, [{ engine: { tokenMs: 10 } }], CONFIG);
  const started = performance.now();
  const answer = call(url, false, 400);
  await neverEjected(gateway, answer);
  const outcome = await answer;
  assert.ok(outcome.complete, 'answered whole');
  assert.ok(performance.now() - started > 2 * PROGRESS_TIMEOUT_MS, 'it really was silent for over 2 timeouts');
});

test('healthy: a long prefill (chunked, KV use growing) is kept though its stream has no first byte for seconds', async (t) => {
  const { gateway, url } = await startReadyFleet(
    t,
    [{ engine: { tokenMs: 2, prefillTokensPerMs: 10, chunkedPrefillTokens: 2_000 } }],
    CONFIG,
  );
  const started = performance.now();
  let firstByteMs = 0;
  const answer = fetch(`${url}/generate`, {
    method: 'POST',
    body: JSON.stringify({
      input_ids: Array.from({ length: 40_000 }, (_, i) => i % 1000),
      stream: true,
      sampling_params: { max_new_tokens: 20 },
    }),
    signal: AbortSignal.timeout(30_000),
  }).then(async (res) => {
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let text = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return text;
      if (firstByteMs === 0) firstByteMs = performance.now() - started;
      text += Buffer.from(value).toString();
    }
  });
  await neverEjected(gateway, answer);
  assert.ok((await answer).includes('[DONE]'), 'the stream completed');
  assert.ok(firstByteMs > 2 * PROGRESS_TIMEOUT_MS, `prefill took ${Math.round(firstByteMs)} ms, over 2 timeouts`);
});

test('healthy: a backend whose own queue holds streams for several timeouts under a flood is kept', async (t) => {
  const { gateway, url, sims } = await startReadyFleet(t, [{ engine: { tokenMs: 5, maxRunningRequests: 2 } }], {
    ...CONFIG,
    routing: { ...CONFIG.routing, max_inflight_per_backend: 0 },
  });
  const flood = Promise.all(Array.from({ length: 24 }, (_, i) => call(url, i % 3 !== 0, 60)));
  await waitFor(() => sims[0].counters.requests >= 24, { what: 'the flood at the backend' });
  await neverEjected(gateway, flood);
  const outcomes = await flood;
  assert.ok(outcomes.every((o) => o.complete));
});
