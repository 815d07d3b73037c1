/**
 * The simulator in thinking mode over real TCP, against a real Qwen3 tokenizer and chat template:
 * SGLang's and vLLM's streamed and non-streamed chat shapes (reasoning field by version,
 * `enable_thinking: false`, `stream_reasoning: false`, `separate_reasoning: false`, usage), the raw
 * APIs' text with the markers inline, and token-exact continuation: a prompt of the rendered chat
 * plus the tokens one engine sent, given to another engine (`/generate` `input_ids`, vLLM
 * `/v1/completions` token ids), yields exactly the rest of the uninterrupted answer.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { loadChatModel, packagedQwen3Dir } from '../../src/model/chat-model.js';
import { expectedThinkingAnswer, type SimOptions, SimServer } from '../../src/sim/index.js';
import { freePort } from '../helpers/net.js';

const dir = packagedQwen3Dir();
const qwen = loadChatModel(dir);
const thinkTokens: [number, number] = [20, 30];
const messages = [{ role: 'user', content: 'What is the capital of France?' }];
const servers = new Map<string, SimServer>();

async function start(name: string, opts: Partial<SimOptions>): Promise<void> {
  const server = new SimServer({
    port: await freePort(),
    modelPath: dir,
    thinkTokens,
    engine: { tokenMs: 0 },
    ...opts,
  });
  server.start();
  servers.set(name, server);
}

before(async () => {
  await start('sglang', { reasoningParser: 'qwen3' });
  await start('r1', { reasoningParser: 'deepseek-r1' });
  await start('vllm', { kind: 'vllm', reasoningParser: 'qwen3' });
  await start('vllm-old', { kind: 'vllm', reasoningParser: 'qwen3', vllmReasoningField: 'reasoning_content' });
  await start('vllm-both', { kind: 'vllm', reasoningParser: 'qwen3', vllmReasoningField: 'both' });
  await Promise.all([...servers.values()].map((s) => s.whenReady(10_000)));
});
after(() => Promise.all([...servers.values()].map((s) => s.stop())));

function url(name: string, path: string): string {
  return `${(servers.get(name) as SimServer).url}${path}`;
}

type Json = Record<string, unknown>;

async function post(name: string, path: string, body: object): Promise<string> {
  const res = await fetch(url(name, path), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 200);
  return res.text();
}

/** The JSON payloads of an SSE body, `[DONE]` left out. */
function events(text: string): Json[] {
  const data = text
    .split('\n\n')
    .filter(Boolean)
    .map((e) => e.slice('data: '.length));
  assert.equal(data.at(-1), '[DONE]');
  return data.slice(0, -1).map((d) => JSON.parse(d) as Json);
}

interface Delta {
  content?: string | null;
  reasoning_content?: string | null;
  reasoning?: string | null;
  role?: string | null;
}

function deltas(chunks: Json[]): Delta[] {
  return chunks.flatMap((c) => (c.choices as { delta: Delta }[]).map((choice) => choice.delta));
}

function joined(list: Delta[], key: keyof Delta): string {
  return list.map((d) => d[key] ?? '').join('');
}

const expected = (request: object = {}) =>
  expectedThinkingAnswer(
    { messages, max_tokens: 80, ...request },
    { modelPath: dir, reasoningParser: 'qwen3', thinkTokens },
  );

test('SGLang streamed chat: reasoning_content deltas, then content; the markers write no chunk', async () => {
  const want = expected();
  assert.ok(want.reasoning.length > 0 && want.content.length > 0);
  const chunks = events(
    await post('sglang', '/v1/chat/completions', {
      messages,
      max_tokens: 80,
      stream: true,
      stream_options: { include_usage: true },
    }),
  );
  const list = deltas(chunks);
  assert.equal(joined(list, 'reasoning_content'), want.reasoning);
  assert.equal(joined(list, 'content'), want.content);
  for (const d of list) {
    assert.ok(!`${d.content ?? ''}${d.reasoning_content ?? ''}`.includes('think>'), 'no marker in either field');
    assert.ok(!(d.content && d.reasoning_content), 'one field per delta');
  }
  const firstContent = list.findIndex((d) => d.content);
  assert.ok(
    list.slice(firstContent).every((d) => !d.reasoning_content),
    'reasoning comes first, then the answer',
  );
  // 80 tokens minus the two markers, the role chunk and the finish chunk.
  assert.equal(list.length, 1 + 78 + 1);
  const usage = chunks.at(-1)?.usage as Json;
  assert.equal(usage.completion_tokens, 80);
  assert.equal(usage.prompt_tokens, want.promptTokens);
  assert.equal(usage.reasoning_tokens, want.reasoningTokens);
});

test('SGLang non-streamed chat: message.reasoning_content and content; a length cut mid-reasoning has content ""', async () => {
  const want = expected();
  const body = JSON.parse(await post('sglang', '/v1/chat/completions', { messages, max_tokens: 80 })) as Json;
  const [choice] = body.choices as { message: Json; finish_reason: string }[];
  assert.deepEqual(
    [choice.message.reasoning_content, choice.message.content, choice.finish_reason],
    [want.reasoning, want.content, 'length'],
  );
  assert.equal((body.usage as Json).reasoning_tokens, want.reasoningTokens);
  const cut = JSON.parse(await post('sglang', '/v1/chat/completions', { messages, max_tokens: 5 })) as Json;
  const [short] = cut.choices as { message: Json }[];
  assert.deepEqual(
    [short.message.reasoning_content, short.message.content],
    [expected({ max_tokens: 5 }).reasoning, ''],
  );
});

test('<sim:len=N> ends the whole answer, reasoning included, with finish_reason stop', async () => {
  const asked = [{ role: 'user', content: 'Short one <sim:len=40>' }];
  const want = expectedThinkingAnswer(
    { messages: asked, max_tokens: 500 },
    { modelPath: dir, reasoningParser: 'qwen3', thinkTokens },
  );
  assert.equal(want.completionTokens, 40);
  const body = JSON.parse(await post('sglang', '/v1/chat/completions', { messages: asked, max_tokens: 500 })) as Json;
  const [choice] = body.choices as { message: Json; finish_reason: string }[];
  assert.deepEqual([choice.message.content, choice.finish_reason], [want.content, 'stop']);
  assert.equal((body.usage as Json).completion_tokens, 40);
});

test('enable_thinking false: the template closes an empty think block, the answer comes alone', async () => {
  const kwargs = { chat_template_kwargs: { enable_thinking: false } };
  const want = expected(kwargs);
  assert.equal(want.reasoning, '');
  const list = deltas(
    events(await post('sglang', '/v1/chat/completions', { messages, max_tokens: 80, stream: true, ...kwargs })),
  );
  assert.equal(joined(list, 'content'), want.content);
  assert.ok(list.every((d) => !d.reasoning_content));
  const body = JSON.parse(
    await post('sglang', '/v1/chat/completions', { messages, max_tokens: 80, ...kwargs }),
  ) as Json;
  const [choice] = body.choices as { message: Json }[];
  assert.deepEqual([choice.message.reasoning_content, choice.message.content], [null, want.content]);
  assert.equal(
    (body.usage as Json).prompt_tokens,
    qwen.encode(qwen.render(messages, { templateKwargs: kwargs.chat_template_kwargs })).length,
  );
});

test('stream_reasoning false: SGLang sends the reasoning in one chunk when </think> arrives (its detector keeps the <think> it saw)', async () => {
  const want = expected();
  const list = deltas(
    events(
      await post('sglang', '/v1/chat/completions', { messages, max_tokens: 80, stream: true, stream_reasoning: false }),
    ),
  );
  const reasoning = list.filter((d) => d.reasoning_content);
  assert.equal(reasoning.length, 1);
  assert.equal(reasoning[0].reasoning_content, `<think>${want.reasoning}`);
  assert.equal(joined(list, 'content'), want.content);
  const cut = deltas(
    events(
      await post('sglang', '/v1/chat/completions', { messages, max_tokens: 6, stream: true, stream_reasoning: false }),
    ),
  );
  assert.deepEqual(
    cut.filter((d) => d.reasoning_content).map((d) => d.reasoning_content),
    [expected({ max_tokens: 6 }).reasoning],
    'a length cut inside the block flushes the held reasoning at the end, without <think>',
  );
});

test('separate_reasoning false: the raw text, markers inline, in content', async () => {
  const want = expected();
  const list = deltas(
    events(
      await post('sglang', '/v1/chat/completions', {
        messages,
        max_tokens: 80,
        stream: true,
        separate_reasoning: false,
      }),
    ),
  );
  assert.equal(joined(list, 'content'), want.raw);
  assert.ok(list.every((d) => !d.reasoning_content));
});

test('deepseek-r1: the same script; the answer is split the same way', async () => {
  const want = expectedThinkingAnswer(
    { messages, max_tokens: 60 },
    { modelPath: dir, reasoningParser: 'deepseek-r1', thinkTokens },
  );
  const list = deltas(events(await post('r1', '/v1/chat/completions', { messages, max_tokens: 60, stream: true })));
  assert.equal(joined(list, 'reasoning_content'), want.reasoning);
  assert.equal(joined(list, 'content'), want.content);
});

test('vLLM: reasoning (newest), reasoning_content (up to v0.11), both (in between), streamed and not', async () => {
  const want = expected();
  for (const [name, keys] of [
    ['vllm', ['reasoning']],
    ['vllm-old', ['reasoning_content']],
    ['vllm-both', ['reasoning', 'reasoning_content']],
  ] as const) {
    const chunks = events(
      await post(name, '/v1/chat/completions', {
        messages,
        max_tokens: 80,
        stream: true,
        stream_options: { include_usage: true },
      }),
    );
    const list = deltas(chunks);
    for (const key of keys) assert.equal(joined(list, key), want.reasoning, `${name} ${key}`);
    assert.equal(joined(list, 'content'), want.content);
    const other = name === 'vllm' ? 'reasoning_content' : name === 'vllm-old' ? 'reasoning' : null;
    if (other !== null)
      assert.ok(
        list.every((d) => !(other in d)),
        `${name} sends no ${other}`,
      );
    const usage = chunks.at(-1)?.usage as Json;
    assert.equal(usage.completion_tokens, 80);
    const details = usage.completion_tokens_details as Json | undefined;
    if (name === 'vllm') assert.equal(details?.reasoning_tokens, want.reasoning === '' ? 0 : want.reasoningTokens - 2);
    else assert.equal(details, undefined);
    const body = JSON.parse(await post(name, '/v1/chat/completions', { messages, max_tokens: 80 })) as Json;
    const [choice] = body.choices as { message: Json }[];
    for (const key of keys) assert.equal(choice.message[key], want.reasoning);
    assert.equal(choice.message.content, want.content);
  }
  const cut = JSON.parse(await post('vllm', '/v1/chat/completions', { messages, max_tokens: 5 })) as Json;
  assert.equal((cut.choices as { message: Json }[])[0].message.content, null, 'vLLM: no answer yet is content null');
});

test('/generate returns the raw text with the markers inline (no reasoning parser there)', async () => {
  const want = expected();
  const ids = qwen.encode(qwen.render(messages));
  const body = JSON.parse(
    await post('sglang', '/generate', { input_ids: ids, sampling_params: { max_new_tokens: 80 } }),
  ) as Json;
  assert.equal(body.text, want.raw);
  assert.deepEqual(body.output_ids, qwen.encode(want.raw));
  const meta = body.meta_info as Json;
  assert.deepEqual([meta.prompt_tokens, meta.completion_tokens], [ids.length, 80]);
});

/** The prompt a resume sends: the rendered chat and the first `cut` tokens of the answer. */
function cutPrompt(cut: number): { ids: number[]; rest: string; sent: string } {
  const want = expected();
  const answer = qwen.encode(want.raw);
  const sent = qwen.decode(answer.slice(0, cut));
  return {
    ids: [...qwen.encode(qwen.render(messages)), ...answer.slice(0, cut)],
    rest: want.raw.slice(sent.length),
    sent,
  };
}

test('continuation through /generate input_ids, streamed: exactly the rest, cut mid-reasoning, at </think>, mid-content', async () => {
  const want = expected();
  const close = qwen.encode(want.raw).indexOf(qwen.encode('</think>')[0]);
  for (const cut of [3, close, close + 1, close + 6]) {
    const { ids, rest, sent } = cutPrompt(cut);
    const streamed = events(
      await post('sglang', '/generate', {
        input_ids: ids,
        sampling_params: { max_new_tokens: 80 - cut, temperature: 0 },
        stream: true,
      }),
    );
    const last = streamed.at(-1) as Json;
    assert.equal(last.text, rest, `cut ${cut}`);
    assert.equal(sent + (last.text as string), want.raw);
    const meta = last.meta_info as Json;
    assert.deepEqual([meta.prompt_tokens, meta.completion_tokens], [ids.length, 80 - cut]);
  }
});

test('continuation through vLLM /v1/completions with a token-id prompt: the rest, usage counting what this engine generated', async () => {
  const { ids, rest } = cutPrompt(10);
  const chunks = events(
    await post('vllm', '/v1/completions', {
      prompt: ids,
      max_tokens: 70,
      stream: true,
      stream_options: { include_usage: true },
    }),
  );
  const text = chunks.flatMap((c) => (c.choices as { text: string }[]).map((choice) => choice.text)).join('');
  assert.equal(text, rest);
  const usage = chunks.at(-1)?.usage as Json;
  assert.deepEqual([usage.prompt_tokens, usage.completion_tokens], [ids.length, 70]);
  const body = JSON.parse(await post('vllm', '/v1/completions', { prompt: ids, max_tokens: 70 })) as Json;
  assert.equal((body.choices as { text: string }[])[0].text, rest);
});

test('a continuation whose prompt closed the think block answers, never reasons again', async () => {
  const ids = qwen.encode(`${qwen.render(messages)}<think>\nOkay\n</think>\n\nParis`);
  const body = JSON.parse(
    await post('sglang', '/generate', { input_ids: ids, sampling_params: { max_new_tokens: 6 } }),
  ) as Json;
  assert.equal(body.text, ' is the capital and most populous');
  assert.ok(!(body.text as string).includes('think'));
});
