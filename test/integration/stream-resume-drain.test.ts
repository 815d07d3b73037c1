/**
 * The drain deadline over real TCP: a backend drained (or deleted) with a stream still running on it
 * has that stream ended once the deadline passes, and the stream resumes on another backend, whole
 * (one finish_reason, one [DONE], no error event, the text the uncut answer); the drained backend is
 * left with nothing in flight and its generation aborted. With the deadline off (`0`) the stream
 * finishes where it runs; a non-streamed request cut by the deadline is re-sent.
 */
import assert from 'node:assert/strict';
import { type TestContext, test } from 'node:test';
import { request } from 'undici';
import type { SimServer } from '../../src/sim/index.js';
import { outputText } from '../../src/sim/text-gen.js';
import { createSims } from '../helpers/fleet.js';
import { metricOf, type ResumeFleet, resumeFleet } from '../helpers/resume-fleet.js';
import { assertWholeStream } from '../helpers/stream-check.js';
import { type LiveStream, streamFrom } from '../helpers/streamed-request.js';
import { waitFor } from '../helpers/wait.js';

const MAX_TOKENS = 80;
const DEADLINE_MS = 300;
const CHAT = {
  model: 'default',
  stream: true,
  max_tokens: MAX_TOKENS,
  messages: [{ role: 'user', content: 'Tell me about Paris' }],
};

interface DrainSetup extends ResumeFleet {
  /** The slow backend the stream runs on (40 ms a token: 3.2 s for the whole answer). */
  busy: SimServer;
}

/** A fleet whose stream runs on `gpu0`; the spare `gpu1` is ready by the time this returns. */
async function drainFleet(t: TestContext, health: Record<string, string> = {}) {
  const [busy] = await createSims(t, [{ engine: { tokenMs: 40 } }]);
  busy.start();
  await busy.whenReady();
  const fleet = await resumeFleet(t, busy, {
    health: { starting_interval: '100ms', interval: '1s', fall: 1, ...health },
  });
  return { ...fleet, busy } satisfies DrainSetup;
}

async function startStream(fleet: DrainSetup): Promise<LiveStream> {
  const stream = streamFrom(fleet.url, '/v1/chat/completions', CHAT);
  await stream.atTokens(5);
  await fleet.admitSpare();
  return stream;
}

async function admin(url: string, method: 'POST' | 'DELETE', path: string) {
  const res = await request(`${url}${path}`, { method });
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
}

/** The stream was cut on gpu0 and continued on gpu1: whole, and gpu1 got exactly the cut part back. */
function assertResumedOnSpare(fleet: DrainSetup, got: Awaited<LiveStream['done']>): void {
  assert.equal(got.status, 200);
  assertWholeStream(got, MAX_TOKENS);
  assert.deepEqual(got.comments, ['resumed on gpu1 after gpu0 failed']);
  const cutPart = got.body.slice(0, got.body.indexOf(': resumed'));
  const sent = (cutPart.match(/"content":"[^"]/g) ?? []).length;
  assert.ok(sent >= 5 && sent < MAX_TOKENS, `cut after ${sent} tokens`);
  assert.equal(fleet.spareBodies.length, 1, 'one continuation, received by gpu1');
  const continuation = fleet.spareBodies[0];
  assert.deepEqual(continuation.messages, [...CHAT.messages, { role: 'assistant', content: outputText(sent) }]);
  assert.equal(continuation.continue_final_message, true);
  assert.equal(continuation.max_tokens, MAX_TOKENS - sent);
}

test('drain with ?deadline=300ms: the stream on the drained backend resumes on the other after the deadline', async (t) => {
  const fleet = await drainFleet(t);
  const registry = fleet.gateway.fleet.registry;
  const stream = await startStream(fleet);

  const drained = await admin(fleet.url, 'POST', `/fleet/backends/gpu0/drain?deadline=${DEADLINE_MS}ms`);
  const drainedAt = performance.now();
  assert.equal(drained.status, 200);
  assert.equal(drained.body.state, 'draining');
  assert.equal(drained.body.drain_deadline, `${DEADLINE_MS}ms`);
  await waitFor(() => stream.received().includes(': resumed'), { what: 'the resume', timeoutMs: 10_000 });
  const cutAfter = performance.now() - drainedAt;
  assert.ok(cutAfter >= DEADLINE_MS - 20, `cut ${Math.round(cutAfter)} ms after the drain, not before its deadline`);

  assertResumedOnSpare(fleet, await stream.done);
  const backend = registry.get('gpu0');
  await waitFor(() => backend?.inflight === 0, { what: 'gpu0 has nothing in flight' });
  assert.equal(backend?.state, 'draining', 'still drained: the deadline ends requests, not the drain');
  await waitFor(() => fleet.busy.counters.aborted === 1, { what: "gpu0's generation aborted (its GPU freed)" });
  assert.equal(fleet.busy.counters.completed, 0);
  assert.equal(
    await metricOf(fleet.gateway, 'fleetgate_stream_resumes_total', { backend: 'gpu0', reason: 'drain_deadline' }),
    1,
  );
  assert.equal(
    await metricOf(fleet.gateway, 'fleetgate_upstream_errors_total', { backend: 'gpu0', kind: 'drain_deadline' }),
    1,
  );
});

test('delete under health.drain_deadline: 300ms: the stream resumes elsewhere and the backend leaves at once', async (t) => {
  const fleet = await drainFleet(t, { drain_deadline: `${DEADLINE_MS}ms` });
  const registry = fleet.gateway.fleet.registry;
  const stream = await startStream(fleet);

  const removed = await admin(fleet.url, 'DELETE', '/fleet/backends/gpu0');
  assert.equal(removed.status, 202);
  assert.equal(removed.body.removed, false, 'the stream still runs there');
  assert.equal(removed.body.drain_deadline, `${DEADLINE_MS}ms`, 'the configured deadline');

  assertResumedOnSpare(fleet, await stream.done);
  await waitFor(() => registry.get('gpu0') === undefined, { what: 'gpu0 removed' });
  assert.equal(fleet.busy.counters.completed, 0, 'the generation did not run to its end on gpu0');
});

test('deadline 0 (?deadline=0 over a configured 300ms): the stream finishes on the drained backend', async (t) => {
  const fleet = await drainFleet(t, { drain_deadline: `${DEADLINE_MS}ms` });
  const stream = await startStream(fleet);

  const drained = await admin(fleet.url, 'POST', '/fleet/backends/gpu0/drain?deadline=0');
  assert.equal(drained.status, 200);
  assert.equal(drained.body.drain_deadline, null, 'no deadline');

  const got = await stream.done;
  assertWholeStream(got, MAX_TOKENS);
  assert.deepEqual(got.comments, [], 'not resumed');
  assert.equal(fleet.spareBodies.length, 0);
  assert.equal(fleet.busy.counters.completed, 1, 'it ran to its end on gpu0');
});

test('a non-streamed request on a backend drained past its deadline is re-sent and answered whole', async (t) => {
  const fleet = await drainFleet(t);
  const registry = fleet.gateway.fleet.registry;
  const answer = request(`${fleet.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...CHAT, stream: false }),
  });
  await waitFor(() => fleet.busy.counters.generatedTokens >= 5, { what: 'gpu0 generating' });
  await fleet.admitSpare();

  assert.equal((await admin(fleet.url, 'POST', `/fleet/backends/gpu0/drain?deadline=${DEADLINE_MS}ms`)).status, 200);
  const res = await answer;
  const body = (await res.body.json()) as {
    choices: Array<{ message: { content: string }; finish_reason: string }>;
    usage: { completion_tokens: number };
  };
  assert.equal(res.statusCode, 200);
  assert.equal(body.choices[0].message.content, outputText(MAX_TOKENS), 'the whole answer, generated anew on gpu1');
  assert.equal(body.choices[0].finish_reason, 'length');
  assert.equal(fleet.spareBodies.length, 1, 'the original request, re-sent to gpu1');
  assert.equal(fleet.spareBodies[0].continue_final_message, undefined);
  await waitFor(() => registry.get('gpu0')?.inflight === 0, { what: 'gpu0 has nothing in flight' });
  assert.equal(await metricOf(fleet.gateway, 'fleetgate_retries_total', { backend: 'gpu0' }), 1);
  assert.equal(
    await metricOf(fleet.gateway, 'fleetgate_upstream_errors_total', { backend: 'gpu0', kind: 'drain_deadline' }),
    1,
  );
});
