/**
 * Token-exact resume, pure: the think splitter, the raw text of what was generated, the raw-API
 * continuation built from a chat body with the real Qwen3 tokenizer and template, the raw answer's
 * events read and turned back into chat events; and the journal reading vLLM's `reasoning` after
 * the first event and mid-chunk (one reader for both names).
 */
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { text as readText } from 'node:stream/consumers';
import { test } from 'node:test';
import { loadChatModel, packagedQwen3Dir } from '../../src/model/chat-model.js';
import { RawToChat } from '../../src/proxy/raw-to-chat.js';
import { CHAT_SHAPE } from '../../src/proxy/sse-event.js';
import { StreamJournal } from '../../src/proxy/stream-journal.js';
import { generatedRaw, opensThink, ThinkSplitter } from '../../src/proxy/think-split.js';
import { RawEventReader, tokenPlan } from '../../src/proxy/token-continuation.js';

const qwen3 = loadChatModel(packagedQwen3Dir());
const markers = { start: '<think>', end: '</think>' };
const messages = [{ role: 'user', content: 'Why is the sky blue?' }];

test('ThinkSplitter: reasoning until </think>, content after, a marker cut across pieces held until whole', () => {
  const splitter = new ThinkSplitter(markers, true);
  const pieces = [' blue', ' light\n</th', 'ink>\n\nRay', 'leigh', '.'];
  const out = pieces.map((piece) => splitter.push(piece));
  assert.deepEqual(out[1], { reasoning: ' light\n', content: '' }, "the marker's start is held back");
  assert.equal(out.map((o) => o.reasoning).join(''), ' blue light\n');
  assert.equal(out.map((o) => o.content).join('') + splitter.flush().content, '\n\nRayleigh.');
  const plain = new ThinkSplitter(markers, false);
  assert.deepEqual(plain.push('a <thin'), { reasoning: '', content: 'a ' });
  assert.deepEqual(plain.flush(), { reasoning: '', content: '<thin' }, 'a partial marker at the end is text after all');
});

test('generatedRaw and opensThink: the start marker only where the prompt did not open the block', () => {
  const thinking = qwen3.render(messages);
  const closed = qwen3.render(messages, { templateKwargs: { enable_thinking: false } });
  assert.equal(opensThink(thinking, markers), false);
  assert.equal(opensThink(closed, markers), false, 'enable_thinking false renders a closed, empty block');
  assert.equal(opensThink('<|im_start|>assistant\n<think>\n', markers), true);
  assert.equal(generatedRaw(markers, false, '\nhm', ''), '<think>\nhm');
  assert.equal(generatedRaw(markers, false, '\nhm\n', '\n\nAns'), '<think>\nhm\n</think>\n\nAns');
  assert.equal(generatedRaw(markers, true, '\nhm', ''), '\nhm');
  assert.equal(generatedRaw(markers, false, '', 'Ans'), 'Ans');
});

test('tokenPlan (SGLang): the rendered prompt and what was generated as input_ids, budgets shrunk, sampling kept', () => {
  const body = { model: 'q', messages, max_tokens: 100, temperature: 0.6, top_p: 0.95, stop: ['END'], stream: true };
  const plan = tokenPlan(qwen3, 'sglang', body, '\nLet me think', '');
  assert.ok(plan !== null);
  assert.equal(plan.path, '/generate');
  const ids = plan.body.input_ids as number[];
  assert.equal(qwen3.decode(ids), `${qwen3.render(messages)}<think>\nLet me think`);
  assert.equal(plan.promptTokens, qwen3.encode(qwen3.render(messages)).length);
  assert.equal(plan.generatedTokens, ids.length - plan.promptTokens);
  assert.ok(plan.generatedTokens >= 4, '<think>, \\n and the words');
  assert.equal(plan.inThink, true);
  assert.deepEqual(plan.body.sampling_params, {
    temperature: 0.6,
    top_p: 0.95,
    stop: ['END'],
    max_new_tokens: 100 - plan.generatedTokens,
  });
  assert.equal(plan.body.stream, true);
});

test('tokenPlan (vLLM): a token-id prompt to completions; after </think> the continuation is the answer', () => {
  const body = {
    model: 'q',
    messages,
    max_completion_tokens: 50,
    seed: 7,
    chat_template_kwargs: { enable_thinking: true },
  };
  const plan = tokenPlan(qwen3, 'vllm', body, '\nhm\n', '\n\nThe');
  assert.ok(plan !== null);
  assert.equal(plan.path, '/v1/completions');
  assert.equal(qwen3.decode(plan.body.prompt as number[]), `${qwen3.render(messages)}<think>\nhm\n</think>\n\nThe`);
  assert.equal(plan.inThink, false);
  assert.equal(plan.body.max_tokens, 50 - plan.generatedTokens);
  assert.equal(plan.body.seed, 7);
  assert.deepEqual(plan.body.stream_options, { include_usage: true });
});

test('RawEventReader: SGLang /generate text is cumulative, vLLM completions text per event', () => {
  const sglang = new RawEventReader('sglang');
  assert.deepEqual(sglang.read({ text: 'a', meta_info: { completion_tokens: 1, finish_reason: null } }), {
    text: 'a',
    finish: null,
    completionTokens: 1,
  });
  assert.deepEqual(
    sglang.read({ text: 'ab', meta_info: { completion_tokens: 2, finish_reason: { type: 'length' } } }),
    {
      text: 'b',
      finish: 'length',
      completionTokens: 2,
    },
  );
  const vllm = new RawEventReader('vllm');
  assert.equal(vllm.read({ choices: [{ index: 0, text: 'x', finish_reason: null }] })?.text, 'x');
  assert.equal(vllm.read({ choices: [{ index: 0, text: 'y', finish_reason: 'stop' }] })?.finish, 'stop');
  assert.equal(vllm.read({ choices: [], usage: { completion_tokens: 9 } })?.completionTokens, 9);
});

test('RawToChat: a raw answer becomes reasoning deltas, content deltas, one finish, usage, one [DONE]', async () => {
  const events = ['\nhm', '\nhm\n', '\nhm\n</think>', '\nhm\n</think>\n\nBlue', '\nhm\n</think>\n\nBlue.'].map(
    (text, i) =>
      `data: ${JSON.stringify({ text, meta_info: { completion_tokens: i + 1, finish_reason: i === 4 ? { type: 'stop' } : null } })}\n\n`,
  );
  const raw = Readable.from([...events, 'data: [DONE]\n\n'].map((e) => Buffer.from(e)));
  const chat = raw.pipe(
    new RawToChat({
      reader: new RawEventReader('sglang'),
      markers,
      inThink: true,
      reasoningField: 'reasoning',
      promptTokens: 30,
      includeUsage: true,
    }),
  );
  const out = (await readText(chat)).split('\n\n').filter((e) => e !== '');
  const parsed = out.slice(0, -1).map((e) => JSON.parse(e.slice('data: '.length)));
  const deltas = parsed.flatMap((p) => p.choices.map((c: { delta: Record<string, string> }) => c.delta));
  assert.equal(deltas.map((d) => d.reasoning ?? '').join(''), '\nhm\n');
  assert.equal(deltas.map((d) => d.content ?? '').join(''), '\n\nBlue.');
  assert.ok(
    deltas.every((d) => !JSON.stringify(d).includes('think>')),
    'no marker leaks',
  );
  assert.equal(parsed.filter((p) => p.choices[0]?.finish_reason != null).length, 1);
  assert.deepEqual(parsed[parsed.length - 1].usage, { prompt_tokens: 30, completion_tokens: 5, total_tokens: 35 });
  assert.equal(out[out.length - 1], 'data: [DONE]');
});

test('journal: vLLM reasoning after the first event and mid-chunk is read as reasoning, counted once', () => {
  const event = (delta: object) =>
    `data: ${JSON.stringify({ id: 'c', choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
  const journal = new StreamJournal(CHAT_SHAPE);
  journal.feed(Buffer.from(event({ role: 'assistant', content: '' })));
  const second = event({ reasoning: 'a' });
  journal.feed(Buffer.from(second.slice(0, 30)));
  journal.feed(Buffer.from(second.slice(30) + event({ reasoning: 'b', reasoning_content: 'b' })));
  assert.equal(journal.fedEvents, 2, 'the cut event counts with the bytes that complete it');
  journal.feed(Buffer.from(event({ reasoning: 'c', content: 'd' })));
  assert.equal(journal.reasoning, 'abc');
  assert.equal(journal.reasoningField, 'reasoning');
  assert.equal(journal.refusal, 'reasoning', 'resumed as text it would lose the reasoning');
  assert.equal(journal.tokens, 3, 'one token per event, whichever names carry it');
  assert.equal(journal.text, 'd');
});
