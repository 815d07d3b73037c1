/**
 * Token-exact resume of thinking-mode streams over real TCP (issue #52): per engine kind and
 * reasoning parser, a streamed chat whose engine is SIGKILLed mid-reasoning, at the `</think>`
 * boundary, or mid-answer continues on another engine from the exact tokens. The simulator
 * continues reasoning only when the prompt it gets ends inside an open think block, so a wrong
 * continuation shows here: the client's reasoning concatenated is exactly one uninterrupted
 * engine's (never restarted, never repeated), no think marker leaks into either field, one finish,
 * one `[DONE]`, and `usage.completion_tokens` is the tokens one uninterrupted engine generates.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { packagedQwen3Dir } from '../../src/model/chat-model.js';
import { expectedThinkingAnswer } from '../../src/sim/thinking-expected.js';
import { metricOf, resumeFleet } from '../helpers/resume-fleet.js';
import { startSimProcess } from '../helpers/sim-process.js';

const QWEN3 = packagedQwen3Dir();
const THINK_TOKENS = [24, 24] as const;
const MAX_TOKENS = 72;

interface Seen {
  reasoning: string;
  content: string;
  fields: Set<string>;
  finishes: number;
  dones: number;
  errors: number;
  comments: string[];
  usage: Record<string, number> | null;
}

/** Reads a chat stream event by event; `until(seen)` resolves `reached` the first time it holds. */
function readChat(url: string, body: object, until: (seen: Seen) => boolean) {
  const seen: Seen = {
    reasoning: '',
    content: '',
    fields: new Set(),
    finishes: 0,
    dones: 0,
    errors: 0,
    comments: [],
    usage: null,
  };
  let reach: () => void = () => {};
  const reached = new Promise<void>((resolve) => {
    reach = resolve;
  });
  const done = (async () => {
    const res = await request(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    assert.equal(res.statusCode, 200);
    let pending = '';
    for await (const chunk of res.body) {
      pending += chunk.toString();
      let at = pending.indexOf('\n\n');
      while (at >= 0) {
        const event = pending.slice(0, at);
        pending = pending.slice(at + 2);
        at = pending.indexOf('\n\n');
        if (event.startsWith(':')) seen.comments.push(event.slice(1).trim());
        if (!event.startsWith('data: ')) continue;
        const data = event.slice(6);
        if (data === '[DONE]') {
          seen.dones++;
          continue;
        }
        const parsed = JSON.parse(data);
        if (parsed.error !== undefined) seen.errors++;
        if (parsed.usage) seen.usage = parsed.usage;
        for (const choice of parsed.choices ?? []) {
          if (choice.finish_reason != null) seen.finishes++;
          const delta = choice.delta ?? {};
          for (const field of ['reasoning_content', 'reasoning']) {
            if (typeof delta[field] === 'string' && delta[field] !== '') {
              seen.fields.add(field);
              // vLLM versions that send both names carry the same text twice: count it once.
              if (field === 'reasoning' && typeof delta.reasoning_content === 'string') continue;
              seen.reasoning += delta[field];
            }
          }
          if (typeof delta.content === 'string') seen.content += delta.content;
        }
        if (until(seen)) reach();
      }
    }
    reach();
    return seen;
  })();
  return { reached, done };
}

const CUTS = {
  'mid-reasoning': (seen: Seen) => seen.reasoning.length > 0 && seen.reasoning.split(' ').length > 8,
  'at the </think> boundary': (seen: Seen, whole: string) => seen.reasoning === whole,
  'mid-answer': (seen: Seen) => seen.content.split(' ').length > 4,
} as const;

for (const kind of ['sglang', 'vllm'] as const) {
  for (const parser of ['qwen3', 'deepseek-r1'] as const) {
    for (const [cut, reached] of Object.entries(CUTS)) {
      test(`${kind} ${parser}: an engine SIGKILLed ${cut} continues token-exact on another`, async (t) => {
        const simFlags = ['--model-path', QWEN3, '--reasoning-parser', parser, '--think-tokens', '24-24'];
        const dying = await startSimProcess(t, 'gpu0', [...simFlags, '--kind', kind, '--token-ms', '60']);
        const fleet = await resumeFleet(
          t,
          dying,
          { kind, model: { dir: QWEN3 } },
          { kind, modelPath: QWEN3, reasoningParser: parser, thinkTokens: THINK_TOKENS },
        );
        const messages = [{ role: 'user', content: `Why is the sky blue? (${kind} ${parser} ${cut})` }];
        const body = {
          model: 'default',
          messages,
          stream: true,
          max_tokens: MAX_TOKENS,
          stream_options: { include_usage: true },
        };
        const expected = expectedThinkingAnswer(
          { messages, max_tokens: MAX_TOKENS },
          { modelPath: QWEN3, reasoningParser: parser, thinkTokens: THINK_TOKENS },
        );
        const stream = readChat(fleet.url, body, (seen) => reached(seen, expected.reasoning));
        await stream.reached;
        await fleet.admitSpare();
        await dying.kill();
        const got = await stream.done;

        assert.equal(got.errors, 0, 'no error event');
        assert.equal(got.comments.length, 1, `one join: ${got.comments}`);
        assert.equal(got.reasoning, expected.reasoning, 'the reasoning neither restarts nor repeats');
        assert.equal(got.content, expected.content, 'the answer is the uncut one');
        for (const text of [got.reasoning, got.content]) assert.ok(!/<\/?think>/.test(text), 'no marker leaks');
        assert.equal(got.finishes, 1, 'one finish_reason');
        assert.equal(got.dones, 1, 'one [DONE]');
        assert.equal(got.usage?.completion_tokens, expected.completionTokens, 'usage counts what was generated');
        assert.deepEqual([...got.fields], [kind === 'vllm' ? 'reasoning' : 'reasoning_content']);
        const continuation = fleet.spareBodies[0];
        assert.ok(
          Array.isArray(continuation?.input_ids) || Array.isArray(continuation?.prompt),
          'the continuation went as token ids',
        );
        assert.equal(
          await metricOf(fleet.gateway, 'fleetgate_stream_resumes_total', { backend: 'gpu0', reason: 'reset' }),
          1,
        );
      });
    }
  }
}
