/**
 * Token-exact stream resume, pure (docs/stream-resume.md, "Token-exact resume"): with the model's
 * tokenizer and chat template known, a cut chat stream continues from the exact tokens, as NVIDIA
 * Dynamo's migration does: the original prompt rendered by the template, plus what was generated
 * (its reasoning inside the think markers, then its answer), go back to an engine through its raw
 * API (SGLang `/generate` with `input_ids`, vLLM `/v1/completions` with a token-id prompt), with
 * the request's sampling parameters and shrunk budgets. The raw answer is read back by
 * `readRawEvent`; raw-to-chat.ts turns it into the client's chat events.
 */
import type { ChatModel, ThinkMarkers } from '../model/chat-model.js';
import { type Body, remainingBudget } from './continuation.js';
import { generatedRaw, opensThink } from './think-split.js';

export type RawApiKind = 'sglang' | 'vllm';

/** What a continuation sends and what the client's stream had when it was cut. */
export interface TokenPlan {
  /** The raw API it speaks: SGLang's `/generate` or vLLM's completions. */
  kind: RawApiKind;
  path: string;
  body: Body;
  /** Tokens of the rendered prompt. */
  promptTokens: number;
  /** Tokens already generated (what the client got, re-tokenized): the output budget they used. */
  generatedTokens: number;
  /** The generated text so far ends inside an open think block. */
  inThink: boolean;
  /** The model's think markers, where its answer splits into reasoning and content. */
  markers: ThinkMarkers | null;
}

/** The sampling parameters a chat body shares with SGLang's `sampling_params` (same names). */
const SHARED_SAMPLING = [
  'temperature',
  'top_p',
  'top_k',
  'min_p',
  'frequency_penalty',
  'presence_penalty',
  'repetition_penalty',
  'stop',
  'stop_token_ids',
  'ignore_eos',
  'skip_special_tokens',
  'spaces_between_special_tokens',
  'no_stop_trim',
] as const;

/** ...and with vLLM's completions body, which takes a few more. */
const VLLM_SAMPLING = [
  ...SHARED_SAMPLING,
  'seed',
  'min_tokens',
  'length_penalty',
  'include_stop_str_in_output',
] as const;

function copyFields(from: Body, to: Body, keys: readonly string[]): Body {
  for (const key of keys) if (from[key] !== undefined && from[key] !== null) to[key] = from[key];
  return to;
}

/** The `chat_template_kwargs` a body passes to the template (`enable_thinking` and the like). */
function templateKwargs(body: Body): Record<string, unknown> | undefined {
  const kwargs = body.chat_template_kwargs;
  return kwargs !== null && typeof kwargs === 'object' && !Array.isArray(kwargs)
    ? (kwargs as Record<string, unknown>)
    : undefined;
}

/**
 * The continuation of chat `body` on an engine of `kind`, after the client got `reasoning` and
 * `content`. Null when the model has no think markers and reasoning was streamed (nothing to
 * re-enter it with).
 */
export function tokenPlan(
  model: ChatModel,
  kind: RawApiKind,
  body: Body,
  reasoning: string,
  content: string,
): TokenPlan | null {
  const markers = model.think;
  if (markers === null && reasoning !== '') return null;
  const rendered = model.render(body.messages as unknown[], {
    addGenerationPrompt: true,
    templateKwargs: templateKwargs(body),
    tools: body.tools,
  });
  const promptOpens = markers !== null && opensThink(rendered, markers);
  const raw = markers === null ? content : generatedRaw(markers, promptOpens, reasoning, content);
  const promptTokens = model.encode(rendered).length;
  const ids = model.encode(rendered + raw);
  const generatedTokens = ids.length - promptTokens;
  const inThink = markers !== null && (promptOpens || reasoning !== '') && content === '';
  const left = remainingBudget(body, generatedTokens);
  const maxNew = left === null ? undefined : Math.max(1, left);
  if (kind === 'vllm') {
    const out = copyFields(body, { model: body.model, prompt: ids, stream: true }, VLLM_SAMPLING);
    if (maxNew !== undefined) out.max_tokens = maxNew;
    out.stream_options = { include_usage: true };
    return { kind, path: '/v1/completions', body: out, promptTokens, generatedTokens, inThink, markers };
  }
  const sampling = copyFields(body, {}, SHARED_SAMPLING);
  if (maxNew !== undefined) sampling.max_new_tokens = maxNew;
  if (typeof body.min_tokens === 'number') sampling.min_new_tokens = Math.max(0, body.min_tokens - generatedTokens);
  const out: Body = { input_ids: ids, sampling_params: sampling, stream: true };
  if (body.priority !== undefined) out.priority = body.priority;
  return { kind, path: '/generate', body: out, promptTokens, generatedTokens, inThink, markers };
}

/** One raw answer event, read: the new text, the finish when it came, the engine's token count. */
export interface RawEvent {
  text: string;
  finish: string | null;
  completionTokens: number | null;
}

/** Reads raw answers' events in order; SGLang's `/generate` text is cumulative, vLLM's per event. */
export class RawEventReader {
  readonly #kind: RawApiKind;
  #seen = '';

  constructor(kind: RawApiKind) {
    this.#kind = kind;
  }

  read(event: unknown): RawEvent | null {
    if (event === null || typeof event !== 'object') return null;
    const body = event as Body;
    return this.#kind === 'vllm' ? this.#completion(body) : this.#generate(body);
  }

  #generate(body: Body): RawEvent | null {
    if (typeof body.text !== 'string') return null;
    const cumulative = body.text.startsWith(this.#seen);
    const text = cumulative ? body.text.slice(this.#seen.length) : body.text;
    this.#seen = cumulative ? body.text : this.#seen + body.text;
    const meta = (body.meta_info ?? {}) as Body;
    const reason = meta.finish_reason as Body | string | null | undefined;
    const finish = reason == null ? null : typeof reason === 'string' ? reason : String(reason.type ?? 'stop');
    const tokens = typeof meta.completion_tokens === 'number' ? meta.completion_tokens : null;
    return { text, finish: finish === 'abort' ? 'stop' : finish, completionTokens: tokens };
  }

  #completion(body: Body): RawEvent | null {
    const usage = body.usage as Body | null | undefined;
    const tokens = usage != null && typeof usage.completion_tokens === 'number' ? usage.completion_tokens : null;
    const choice = Array.isArray(body.choices) ? (body.choices[0] as Body | undefined) : undefined;
    if (choice === undefined) return tokens === null ? null : { text: '', finish: null, completionTokens: tokens };
    const text = typeof choice.text === 'string' ? choice.text : '';
    const finish = typeof choice.finish_reason === 'string' ? choice.finish_reason : null;
    return { text, finish, completionTokens: tokens };
  }
}
