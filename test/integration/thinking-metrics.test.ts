/**
 * Metrics for thinking over real TCP (issue #52 item 6, docs/operations.md "Token latency"): a
 * simulated SGLang and a simulated vLLM in Qwen3 thinking mode behind one gateway. Each stream's
 * first reasoning delta is its time to first token and its first answer delta its time to the first
 * answer token (later by at least the reasoning's decode steps); its reasoning tokens are the
 * engine's usage figure (SGLang's `usage.reasoning_tokens`, vLLM's
 * `completion_tokens_details.reasoning_tokens`), else the reasoning deltas the stream carried; an
 * answer without thinking observes no reasoning figure; and the serving view's thinking share is the
 * window's reasoning tokens over its output tokens, as the histograms' sums say.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Gateway } from '../../src/app.js';
import { packagedQwen3Dir } from '../../src/model/chat-model.js';
import { backendsFor, createSims, startGateway } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

const TOKEN_MS = 4;
const THINK_TOKENS: [number, number] = [24, 24];

/** Sum and count of a histogram's series of one backend (every model label). */
async function histogramOf(gateway: Gateway, name: string, backend: string) {
  const text = await gateway.metrics.render();
  let sum = 0;
  let count = 0;
  for (const line of text.split('\n')) {
    const match = /^(\w+)_(sum|count)\{(.*)\} (\S+)$/.exec(line);
    if (!match || match[1] !== name || !match[3].includes(`backend="${backend}"`)) continue;
    if (match[3].includes('stream="false"')) continue;
    if (match[2] === 'sum') sum += Number(match[4]);
    else count += Number(match[4]);
  }
  return { sum, count };
}

interface Carried {
  /** The backend that answered, known by the reasoning field its engine kind sends. */
  backend: 'gpu0' | 'gpu1';
  reasoningDeltas: number;
  answerDeltas: number;
  usage: Record<string, unknown> | null;
}

/** What one streamed chat carried: its reasoning and answer deltas and its usage. */
async function streamChat(url: string, body: object): Promise<Carried> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }),
    signal: AbortSignal.timeout(20_000),
  });
  assert.equal(res.status, 200);
  const text = await res.text();
  const carried: Carried = { backend: 'gpu0', reasoningDeltas: 0, answerDeltas: 0, usage: null };
  let fields = '';
  for (const event of text.split('\n\n')) {
    if (!event.startsWith('data: {')) continue;
    const parsed = JSON.parse(event.slice(6));
    if (parsed.usage) carried.usage = parsed.usage;
    for (const choice of parsed.choices ?? []) {
      const delta = choice.delta ?? {};
      const reasoning = ['reasoning_content', 'reasoning'].find((f) => typeof delta[f] === 'string' && delta[f] !== '');
      if (reasoning !== undefined) {
        carried.reasoningDeltas++;
        fields = reasoning;
      }
      if (typeof delta.content === 'string' && delta.content !== '') carried.answerDeltas++;
    }
  }
  assert.match(text, /data: \[DONE\]\n\n$/);
  carried.backend = fields === 'reasoning' ? 'gpu1' : 'gpu0';
  return carried;
}

/** The engine's reasoning figure in `usage`, as each kind sends it; null without one. */
function usageReasoning(usage: Record<string, unknown> | null): number | null {
  if (usage === null) return null;
  const details = usage.completion_tokens_details as { reasoning_tokens?: number } | undefined;
  const figure = details?.reasoning_tokens ?? (usage.reasoning_tokens as number | undefined) ?? null;
  return figure !== null && figure > 0 ? figure : null;
}

test('thinking streams on SGLang and vLLM: TTFT at the first reasoning delta, the first answer later, reasoning tokens as carried, the thinking share', async (t) => {
  const sim = {
    modelPath: packagedQwen3Dir(),
    reasoningParser: 'qwen3' as const,
    thinkTokens: THINK_TOKENS,
    engine: { tokenMs: TOKEN_MS, prefillTokensPerMs: 0, batchPenalty: 0 },
  };
  const sims = await createSims(t, [sim, { ...sim, kind: 'vllm' }]);
  for (const s of sims) s.start();
  await Promise.all(sims.map((s) => s.whenReady()));
  const kinds = ['sglang', 'vllm'];
  const { gateway, url } = await startGateway(t, {
    backends: backendsFor(sims, (_, i) => ({ kind: kinds[i] })),
    routing: { policy: 'round-robin' },
  });
  await waitFor(() => gateway.fleet.registry.ready.length === 2, { what: 'both backends ready' });
  const model = gateway.fleet.registry.get('gpu0')?.model ?? 'default';
  await waitFor(() => gateway.serving.samples > 0, { what: 'a sample of the serving view before the streams' });
  const chat = (content: string, extra: object = {}) =>
    streamChat(url, { model, max_tokens: 60, messages: [{ role: 'user', content }], ...extra });
  // Each backend: streams with and without usage (its figure, else the reasoning deltas counted).
  const streams: Carried[] = [];
  for (const [i, usage] of [true, true, false, false].entries()) {
    streams.push(
      await chat(
        `Question ${i}: what is the capital of France?`,
        usage ? { stream_options: { include_usage: true } } : {},
      ),
    );
  }
  // Thinking off: an answer without reasoning, which observes no reasoning figure.
  const plain = await chat('Say hi', {
    chat_template_kwargs: { enable_thinking: false },
    stream_options: { include_usage: true },
  });
  assert.equal(plain.reasoningDeltas, 0);
  assert.ok(plain.answerDeltas > 0);
  const backends = ['gpu0', 'gpu1'] as const;
  for (const backend of backends) {
    assert.ok(
      streams.some((s) => s.backend === backend && s.usage !== null) &&
        streams.some((s) => s.backend === backend && s.usage === null),
      `${backend} answered a stream with usage and one without`,
    );
  }
  await waitFor(
    async () =>
      (await histogramOf(gateway, 'fleetgate_request_output_tokens', 'gpu0')).count +
        (await histogramOf(gateway, 'fleetgate_request_output_tokens', 'gpu1')).count ===
      streams.length + 1,
    { what: 'every stream counted' },
  );
  const samplesBefore = gateway.serving.samples;
  await waitFor(() => gateway.serving.samples > samplesBefore, { what: 'a sample after the streams' });
  const status = (await (await fetch(`${url}/fleet/status`)).json()) as {
    backends: Array<{ name: string; serving: { thinking_share: number | null } }>;
  };
  let firstTokens = 0;
  for (const backend of backends) {
    const mine = streams.filter((s) => s.backend === backend);
    const ttft = await histogramOf(gateway, 'fleetgate_time_to_first_token_seconds', backend);
    const answer = await histogramOf(gateway, 'fleetgate_time_to_first_answer_token_seconds', backend);
    const reasoning = await histogramOf(gateway, 'fleetgate_request_reasoning_tokens', backend);
    const output = await histogramOf(gateway, 'fleetgate_request_output_tokens', backend);
    // One TTFT and one first answer per stream; the plain one (no field tells its backend) on one of the two.
    firstTokens += ttft.count;
    assert.ok(ttft.count === mine.length || ttft.count === mine.length + 1, `${backend}: ${ttft.count} TTFTs`);
    assert.equal(answer.count, ttft.count, `${backend}: one first answer per stream`);
    // The answer comes after the reasoning: at least its reasoning deltas' decode steps later.
    const thinking = mine.reduce((sum, s) => sum + s.reasoningDeltas, 0);
    assert.ok(
      answer.sum - ttft.sum >= (thinking * TOKEN_MS * 0.8) / 1000,
      `${backend}: first answer ${answer.sum}s vs first token ${ttft.sum}s over ${thinking} reasoning deltas`,
    );
    // One reasoning figure per thinking stream (none for the plain one): the engine's, else the deltas.
    const expected = mine.reduce((sum, s) => sum + (usageReasoning(s.usage) ?? s.reasoningDeltas), 0);
    assert.equal(reasoning.count, mine.length, `${backend}: a reasoning figure per thinking stream only`);
    assert.equal(reasoning.sum, expected, `${backend}: reasoning tokens as the streams carried them`);
    for (const s of mine) assert.ok(s.reasoningDeltas >= THINK_TOKENS[0], `${backend}: it reasoned`);
    const withUsage = mine.find((s) => s.usage !== null);
    assert.ok(usageReasoning(withUsage?.usage ?? null) !== null, `${backend}: its engine sends a reasoning figure`);
    const share = status.backends.find((b) => b.name === backend)?.serving.thinking_share;
    assert.equal(share, Math.round((reasoning.sum / output.sum) * 1000) / 1000, `${backend}: thinking share`);
    assert.ok((share as number) > 0.2 && (share as number) < 1, `${backend}: share ${share}`);
  }
  assert.equal(firstTokens, streams.length + 1, 'one TTFT per stream, the plain one included');
});
