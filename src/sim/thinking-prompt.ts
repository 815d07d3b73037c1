/**
 * Where a thinking-mode answer starts: a chat request's prompt rendered with the model's chat
 * template, or a raw prompt (SGLang `/generate` `input_ids`, vLLM `/v1/completions` with token
 * ids) that holds a rendered conversation followed by part of an answer another engine generated.
 * Both are read the same way: the text after the last assistant opening the template renders is
 * what was already generated, so an engine given that prompt continues exactly where the dead one
 * stopped (reasoning only while the think block is still open). This is the simulator's half of
 * token-exact stream resume (issue #52; docs/sglang-vllm-behaviour.md, "Thinking mode").
 */
import type { ChatModel } from '../model/chat-model.js';
import {
  type ReasoningParserName,
  reasoningWordsFor,
  THINK_CLOSE,
  THINK_OPEN,
  type ThinkingScript,
  type VllmReasoningField,
} from './thinking.js';

export interface ThinkingConfig {
  /** `--reasoning-parser`; null: a thinking model's raw text stays whole in `content`. */
  readonly parser: ReasoningParserName | null;
  readonly thinkTokens: readonly [number, number];
  /** The model directory's tokenizer and template (`--model-path`); null: the simulator's own stand-ins. */
  readonly model: ChatModel | null;
  readonly vllmField: VllmReasoningField;
}

export interface ThinkingPlan {
  readonly script: ThinkingScript;
  /** Script positions the prompt already holds: generation goes on from this one. */
  readonly offset: number;
  readonly promptTokens: number;
  /** The rendered prompt up to the assistant turn: R's hash input, and where `<sim:len=N>` is read. */
  readonly conversation: string;
  /** The whole prompt as text (its prefix-cache identity). */
  readonly rendered: string;
}

const generationPrompts = new WeakMap<ChatModel, { text: string; ids: number[] }>();

/** The assistant opening the template appends for a new answer (Qwen3: `<|im_start|>assistant\n`). */
function generationPrompt(model: ChatModel): { text: string; ids: number[] } {
  let found = generationPrompts.get(model);
  if (found === undefined) {
    const messages = [{ role: 'user', content: 'x' }];
    const withPrompt = model.render(messages, { addGenerationPrompt: true });
    const text = withPrompt.slice(model.render(messages, { addGenerationPrompt: false }).length);
    found = { text, ids: model.encode(text) };
    generationPrompts.set(model, found);
  }
  return found;
}

function lastIndexOfIds(ids: readonly number[], needle: readonly number[]): number {
  for (let i = ids.length - needle.length; i >= 0; i--) {
    let j = 0;
    while (j < needle.length && ids[i + j] === needle[j]) j++;
    if (j === needle.length) return i;
  }
  return -1;
}

/**
 * The script and offset that the answer part of a prompt (`tail`, after the assistant opening)
 * implies. An empty think block is the template's own (`enable_thinking: false`): the answer comes
 * alone, after it. A closed think block holds the reasoning as it was (the script takes its
 * length, so generation goes on in the answer, never back in the reasoning). Otherwise every tail
 * token was generated and the script goes on from there.
 */
function fromTail(
  model: ChatModel,
  tail: readonly number[],
  reasoningWords: number,
): Pick<ThinkingPlan, 'script' | 'offset'> {
  const [open] = model.encode(THINK_OPEN);
  const [close] = model.encode(THINK_CLOSE);
  const start = tail.indexOf(open);
  const at = tail.indexOf(close);
  if (start < 0 || at < start) return { script: { reasoningWords, answerOnly: false }, offset: tail.length };
  if (model.decode(tail.slice(start + 1, at)).trim() === '') {
    let answerFrom = at + 1;
    if (answerFrom < tail.length && model.decode([tail[answerFrom]]) === '\n\n') answerFrom++;
    return { script: { reasoningWords: 0, answerOnly: true }, offset: tail.length - answerFrom };
  }
  // Between the markers: `\n`, the words, `\n`.
  const words = Math.max(0, at - start - 3);
  return { script: { reasoningWords: words, answerOnly: false }, offset: words + 3 + (tail.length - at) };
}

/** A chat request: the template renders the messages (with `chat_template_kwargs`) and a new assistant turn. */
export function chatPlan(
  config: ThinkingConfig,
  messages: readonly unknown[],
  templateKwargs: Readonly<Record<string, unknown>> | undefined,
  tools: unknown,
  /** Without a model directory: the simulator's stand-in rendering and token count. */
  fallback: { rendered: string; tokens: number },
): ThinkingPlan {
  const { model } = config;
  if (model === null) {
    const thinkingOff = templateKwargs?.enable_thinking === false && config.parser !== 'qwen3-thinking';
    const reasoningWords = reasoningWordsFor(fallback.rendered, config.thinkTokens);
    return {
      script: { reasoningWords: thinkingOff ? 0 : reasoningWords, answerOnly: thinkingOff },
      offset: 0,
      promptTokens: fallback.tokens,
      conversation: fallback.rendered,
      rendered: fallback.rendered,
    };
  }
  const rendered = model.render(messages, { addGenerationPrompt: true, templateKwargs, tools });
  const opening = generationPrompt(model).text;
  const at = rendered.lastIndexOf(opening);
  const conversation = at < 0 ? rendered : rendered.slice(0, at);
  const tail = at < 0 ? [] : model.encode(rendered.slice(at + opening.length));
  return {
    ...fromTail(model, tail, reasoningWordsFor(conversation, config.thinkTokens)),
    promptTokens: model.encode(rendered).length,
    conversation,
    rendered,
  };
}

/**
 * A raw prompt (token ids or text) holding a rendered conversation and an assistant turn: the
 * continuation of that turn. Null without a model directory or when the prompt holds no
 * assistant opening (then the request is an ordinary raw one).
 */
export function continuationPlan(config: ThinkingConfig, prompt: readonly number[] | string): ThinkingPlan | null {
  const { model } = config;
  if (model === null) return null;
  const ids = typeof prompt === 'string' ? model.encode(prompt) : prompt;
  const opening = generationPrompt(model).ids;
  const at = lastIndexOfIds(ids, opening);
  if (at < 0) return null;
  const conversation = model.decode(ids.slice(0, at));
  const tail = ids.slice(at + opening.length);
  return {
    ...fromTail(model, tail, reasoningWordsFor(conversation, config.thinkTokens)),
    promptTokens: ids.length,
    conversation,
    rendered: typeof prompt === 'string' ? prompt : ids.join(','),
  };
}
