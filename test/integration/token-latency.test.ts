/**
 * Token latency over real TCP (docs/operations.md, "Token latency"): simulated servers with a known
 * token pace give inter-token and time-per-output-token histograms whose mean is that pace, a time
 * to first token within its bound, and a slowed server's series visibly slower; a stream resumed
 * after its server is SIGKILLed counts one time to first token, inter-token gaps on both servers and
 * one output-token count equal to what the client received.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Gateway } from '../../src/app.js';
import { startReadyFleet } from '../helpers/fleet.js';
import { resumeFleet } from '../helpers/resume-fleet.js';
import { startSimProcess } from '../helpers/sim-process.js';
import { assertWholeStream } from '../helpers/stream-check.js';
import { streamFrom } from '../helpers/streamed-request.js';
import { waitFor } from '../helpers/wait.js';

/** Sum and count of a histogram's series of one backend (every model and stream label). */
async function histogramOf(gateway: Gateway, name: string, backend: string, extra: Record<string, string> = {}) {
  const text = await gateway.metrics.render();
  let sum = 0;
  let count = 0;
  for (const line of text.split('\n')) {
    const match = /^(\w+)_(sum|count)\{(.*)\} (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const labels = Object.fromEntries([...match[3].matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (labels.backend !== backend || Object.entries(extra).some(([k, v]) => labels[k] !== v)) continue;
    if (match[2] === 'sum') sum += Number(match[4]);
    else count += Number(match[4]);
  }
  return { sum, count, mean: count > 0 ? sum / count : Number.NaN };
}

const PACE_MS = 50;
const SLOWDOWN = 3;
const TOKENS = 30;

test('a known token pace: inter-token and TPOT means within 20 % of it, TTFT within its bound, the slowed backend slower', async (t) => {
  const engine = { tokenMs: PACE_MS, prefillTokensPerMs: 0, batchPenalty: 0 };
  const { gateway, url } = await startReadyFleet(t, [{ engine }, { engine: { ...engine, slowdown: SLOWDOWN } }], {
    routing: { policy: 'round-robin' },
  });
  const streams = Array.from({ length: 4 }, () =>
    streamFrom(url, '/v1/chat/completions', {
      model: 'default',
      stream: true,
      max_tokens: TOKENS,
      messages: [{ role: 'user', content: 'Tell me about Paris' }],
    }),
  );
  for (const stream of streams) {
    const got = await stream.done;
    assert.equal(got.status, 200);
    assertWholeStream(got, TOKENS);
  }
  await waitFor(async () => (await histogramOf(gateway, 'fleetgate_request_output_tokens', 'gpu1')).count === 2, {
    what: 'both streams of the slowed backend counted',
  });
  for (const [backend, pace] of [
    ['gpu0', PACE_MS / 1000],
    ['gpu1', (PACE_MS * SLOWDOWN) / 1000],
  ] as const) {
    const itl = await histogramOf(gateway, 'fleetgate_inter_token_latency_seconds', backend);
    const tpot = await histogramOf(gateway, 'fleetgate_time_per_output_token_seconds', backend);
    const ttft = await histogramOf(gateway, 'fleetgate_time_to_first_token_seconds', backend, { stream: 'true' });
    const tokens = await histogramOf(gateway, 'fleetgate_request_output_tokens', backend);
    assert.equal(itl.count, 2 * (TOKENS - 1), `${backend}: one gap per token after the first`);
    assert.ok(Math.abs(itl.mean - pace) <= 0.2 * pace, `${backend}: inter-token mean ${itl.mean} vs pace ${pace}`);
    assert.equal(tpot.count, 2);
    assert.ok(Math.abs(tpot.mean - pace) <= 0.2 * pace, `${backend}: TPOT mean ${tpot.mean} vs pace ${pace}`);
    assert.equal(ttft.count, 2, `${backend}: one TTFT per stream`);
    // The first token takes one decode step (no prefill time here), plus the path through fleetgate.
    assert.ok(ttft.mean >= pace * 0.8 && ttft.mean <= pace * 2 + 0.25, `${backend}: TTFT mean ${ttft.mean}`);
    assert.equal(tokens.sum, 2 * TOKENS, `${backend}: output tokens`);
  }
  const fast = await histogramOf(gateway, 'fleetgate_inter_token_latency_seconds', 'gpu0');
  const slow = await histogramOf(gateway, 'fleetgate_inter_token_latency_seconds', 'gpu1');
  assert.ok(slow.mean > 2 * fast.mean, `slowed ${slow.mean} vs ${fast.mean}`);
});

test('a non-streamed answer: its whole time is its time to first token, under stream="false"', async (t) => {
  const { gateway, url } = await startReadyFleet(t, [{ engine: { tokenMs: 5, prefillTokensPerMs: 0 } }]);
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'default', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }),
  });
  const answer = (await res.json()) as { usage: { completion_tokens: number } };
  await waitFor(async () => (await histogramOf(gateway, 'fleetgate_request_output_tokens', 'gpu0')).count === 1, {
    what: 'the answer counted',
  });
  const whole = await histogramOf(gateway, 'fleetgate_time_to_first_token_seconds', 'gpu0', { stream: 'false' });
  const streamed = await histogramOf(gateway, 'fleetgate_time_to_first_token_seconds', 'gpu0', { stream: 'true' });
  assert.equal(whole.count, 1);
  assert.ok(whole.sum >= 0.04, `the whole answer took ${whole.sum}s`);
  assert.equal(streamed.count, 0);
  assert.equal((await histogramOf(gateway, 'fleetgate_inter_token_latency_seconds', 'gpu0')).count, 0);
  assert.equal(
    (await histogramOf(gateway, 'fleetgate_request_output_tokens', 'gpu0')).sum,
    answer.usage.completion_tokens,
  );
});

test('a stream resumed after a SIGKILL: one TTFT, inter-token gaps on both backends, one output count equal to the client’s', async (t) => {
  const maxTokens = 80;
  const dying = await startSimProcess(t, 'gpu0', ['--token-ms', '40']);
  const fleet = await resumeFleet(t, dying);
  const stream = streamFrom(fleet.url, '/v1/chat/completions', {
    model: 'default',
    stream: true,
    max_tokens: maxTokens,
    messages: [{ role: 'user', content: 'Tell me about Paris' }],
  });
  await stream.atTokens(5);
  await fleet.admitSpare();
  await dying.kill();
  const got = await stream.done;
  assertWholeStream(got, maxTokens);
  const received = (got.body.match(/"(content|text)":"[^"]/g) ?? []).length;
  const { gateway } = fleet;
  const of = (name: string, backend: string, extra?: Record<string, string>) =>
    histogramOf(gateway, name, backend, extra);
  await waitFor(
    async () =>
      (await of('fleetgate_request_output_tokens', 'gpu0')).count +
        (await of('fleetgate_request_output_tokens', 'gpu1')).count ===
      1,
    { what: 'the stream counted' },
  );
  const ttft0 = await of('fleetgate_time_to_first_token_seconds', 'gpu0');
  const ttft1 = await of('fleetgate_time_to_first_token_seconds', 'gpu1');
  assert.equal(ttft0.count, 1, 'the first token came from gpu0');
  assert.equal(ttft1.count, 0, 'no second first token for the continuation');
  const itl0 = await of('fleetgate_inter_token_latency_seconds', 'gpu0');
  const itl1 = await of('fleetgate_inter_token_latency_seconds', 'gpu1');
  assert.ok(itl0.count >= 4, `gpu0 gaps: ${itl0.count}`);
  assert.ok(itl1.count >= 1, `gpu1 gaps: ${itl1.count}`);
  assert.equal(itl0.count + itl1.count, received - 1, 'one gap per token after the first, across the resume');
  const tokens = await of('fleetgate_request_output_tokens', 'gpu1');
  assert.equal(tokens.count, 1, 'counted once, on the backend that ended it');
  assert.equal(tokens.sum, received);
  assert.equal(tokens.sum, maxTokens);
});

test('metrics.token_latency false: no token-latency series, no medians in the serving view', async (t) => {
  const { gateway, url } = await startReadyFleet(t, [{ engine: { tokenMs: 2 } }], {
    metrics: { token_latency: false },
  });
  // The serving view's windows start at a sample: one before the stream, one after it.
  await waitFor(() => gateway.serving.samples > 0, { what: 'a sample of the serving view before the stream' });
  const got = await streamFrom(url, '/v1/chat/completions', {
    model: 'default',
    stream: true,
    max_tokens: 5,
    messages: [{ role: 'user', content: 'hi' }],
  }).done;
  assertWholeStream(got, 5);
  const samplesBefore = gateway.serving.samples;
  await waitFor(() => gateway.serving.samples > samplesBefore, {
    what: 'a sample of the serving view after the stream',
  });
  const status = (await (await fetch(`${url}/fleet/status`)).json()) as {
    backends: Array<{ serving: { ttft_p50_seconds: number | null; thinking_share: number | null } }>;
  };
  assert.equal(status.backends[0].serving.ttft_p50_seconds, null);
  assert.equal(status.backends[0].serving.thinking_share, null, 'the thinking share comes from the histograms');
  const text = await gateway.metrics.render();
  assert.doesNotMatch(
    text,
    /^fleetgate_(time_to_first_token|time_to_first_answer_token|inter_token_latency)_seconds_count/m,
  );
  assert.doesNotMatch(text, /^fleetgate_request_(output|reasoning)_tokens_count/m);
  assert.match(
    text,
    /^fleetgate_request_duration_seconds_count\{backend="gpu0"\} 1$/m,
    'the request itself is counted',
  );
});
