/**
 * The simulator's generation formats as real clients parse them: the `openai` SDK for chat and
 * completions (stream and not), SGLang's `/generate` with cumulative streamed text, and the 400 body.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { SimServer } from '../../src/sim/index.js';
import { freePort } from '../helpers/net.js';

let server: SimServer;
let client: OpenAI;
const model = 'meta-llama/Llama-3.1-8B-Instruct';

before(async () => {
  server = new SimServer({ port: await freePort(), engine: { tokenMs: 1 } });
  server.start();
  await server.whenReady(5000);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(() => server.stop());

/** The `data:` payloads of an SSE body, in order. */
function sseData(text: string): string[] {
  assert.ok(text.endsWith('\n\n'), 'every SSE event ends with a blank line');
  return text
    .split('\n\n')
    .filter(Boolean)
    .map((event) => {
      assert.ok(event.startsWith('data: '), event);
      return event.slice('data: '.length);
    });
}

test('chat completion, not streamed: message, finish_reason and usage', async () => {
  const res = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'Hello there' }],
    max_tokens: 5,
  });
  assert.equal(res.object, 'chat.completion');
  assert.equal(res.choices[0].message.role, 'assistant');
  assert.equal(res.choices[0].message.content, ' Paris. It is the');
  assert.equal(res.choices[0].finish_reason, 'length');
  assert.equal(res.usage?.completion_tokens, 5);
  assert.equal(res.usage?.total_tokens, (res.usage?.prompt_tokens ?? 0) + 5);
});

test('chat completion, streamed: role chunk, content deltas, finish chunk, usage chunk', async () => {
  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'Hello' }],
    max_tokens: 4,
    stream: true,
    stream_options: { include_usage: true },
  });
  let content = '';
  const finishes: (string | null)[] = [];
  let usage: OpenAI.CompletionUsage | null | undefined = null;
  let roles = 0;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      if (choice.delta.role === 'assistant') roles++;
      content += choice.delta.content ?? '';
      finishes.push(choice.finish_reason);
    }
  }
  assert.equal(content, ' Paris. It is');
  assert.equal(roles, 1);
  assert.equal(finishes.at(-1), 'length');
  assert.equal(finishes.filter((f) => f !== null).length, 1);
  assert.equal(usage?.completion_tokens, 4);
});

test('a <sim:len=N> marker ends the answer early with finish_reason stop', async () => {
  const res = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'Be brief <sim:len=2>' }],
    max_tokens: 50,
  });
  assert.equal(res.choices[0].message.content, ' Paris.');
  assert.equal(res.choices[0].finish_reason, 'stop');
  assert.equal(res.usage?.completion_tokens, 2);
});

test('completions, streamed and not', async () => {
  const whole = await client.completions.create({ model, prompt: 'The capital of France is', max_tokens: 3 });
  assert.equal(whole.object, 'text_completion');
  assert.equal(whole.choices[0].text, ' Paris. It');
  assert.equal(whole.choices[0].finish_reason, 'length');
  assert.equal(whole.usage?.completion_tokens, 3);

  const stream = await client.completions.create({ model, prompt: 'x', max_tokens: 3, stream: true });
  let text = '';
  let finish: string | null = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.text ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(text, ' Paris. It');
  assert.equal(finish, 'length');
});

test('default output length is 16 tokens', async () => {
  const res = await client.completions.create({ model, prompt: 'x' });
  assert.equal(res.usage?.completion_tokens, 16);
});

test('the raw chat stream ends with data: [DONE] after the finish chunk', async () => {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, stream: true }),
  });
  assert.equal(res.headers.get('content-type'), 'text/event-stream; charset=utf-8');
  const data = sseData(await res.text());
  assert.equal(data.at(-1), '[DONE]');
  const finish = JSON.parse(data.at(-2) as string);
  assert.equal(finish.choices[0].finish_reason, 'length');
  assert.equal(finish.choices[0].delta.content, null);
});

test('/generate streams cumulative text and ends with [DONE]; not streamed it returns meta_info', async () => {
  const res = await fetch(`${server.url}/generate`, {
    method: 'POST',
    body: JSON.stringify({
      text: 'The capital city of France is',
      sampling_params: { max_new_tokens: 3 },
      stream: true,
    }),
  });
  const data = sseData(await res.text());
  assert.equal(data.at(-1), '[DONE]');
  const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
  assert.deepEqual(
    chunks.map((c) => c.text),
    [' Paris', ' Paris.', ' Paris. It'],
  );
  assert.deepEqual(chunks.at(-1).meta_info.finish_reason, { type: 'length', length: 3 });
  assert.equal(chunks[0].meta_info.finish_reason, null);

  const whole = await fetch(`${server.url}/generate`, {
    method: 'POST',
    body: JSON.stringify({ input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 2 } }),
  });
  const body = (await whole.json()) as { text: string; output_ids: number[]; meta_info: Record<string, unknown> };
  assert.equal(body.text, ' Paris.');
  assert.equal(body.output_ids.length, 2);
  assert.equal(body.meta_info.prompt_tokens, 3);
  assert.equal(body.meta_info.completion_tokens, 2);
});

test('bad requests get 400 with SGLang error bodies', async () => {
  const cases: [string, string][] = [
    ['/generate', '{not json'],
    ['/generate', JSON.stringify({ sampling_params: {} })],
    ['/v1/chat/completions', JSON.stringify({ model })],
    ['/v1/completions', JSON.stringify({ model })],
    ['/v1/completions', JSON.stringify({ model, prompt: 'x', max_tokens: -1 })],
  ];
  for (const [path, body] of cases) {
    const res = await fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    assert.equal(res.status, 400, `${path} ${body}`);
    const json = (await res.json()) as Record<string, unknown>;
    assert.equal(json.object, 'error');
    assert.equal(json.type, 'BadRequestError');
    assert.equal(json.code, 400);
    assert.equal(json.param, null);
    assert.equal(typeof json.message, 'string');
  }
  await assert.rejects(client.chat.completions.create({ model, messages: [] }), (error: unknown) => {
    assert.ok(error instanceof OpenAI.BadRequestError);
    return true;
  });
});

test('/v1/models lists the served model', async () => {
  const models = await client.models.list();
  assert.deepEqual(
    models.data.map((m) => m.id),
    [model],
  );
  const one = await client.models.retrieve(model);
  assert.equal(one.id, model);
  await assert.rejects(client.models.retrieve('other/model'), OpenAI.NotFoundError);
});
