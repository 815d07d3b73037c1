/**
 * Stream resume's rules (docs/stream-resume.md), pure: whether a request may ever be continued, the
 * output budget left, and the continuation's body. What a stream sent is read by stream-journal.ts;
 * the I/O is stream-resume.ts's.
 */

import { isObject } from '../config/json-object.js';
import { generationApiOf, messageText } from '../routing/openai-request.js';

export type ResumeApi = 'chat' | 'completion';

/** Every `reason` of `fleetgate_stream_resume_failures_total`, so each series exists from the start. */
export const RESUME_REFUSALS = [
  'n',
  'constrained',
  'echo',
  'suffix',
  'logprobs',
  'tool_calls',
  'reasoning',
  'unbuildable',
  'limit',
  'no_backend',
  'rejected',
] as const satisfies readonly ResumeRefusal[];

/** Why a cut stream was not continued: the `reason` of `fleetgate_stream_resume_failures_total`. */
export type ResumeRefusal =
  /** `n` or `best_of` > 1: several choices, one continuation body cannot carry them. */
  | 'n'
  /** A grammar (`response_format`, `json_schema`, `regex`, `ebnf`, `guided_*`) would start again from its beginning. */
  | 'constrained'
  /** Completions `echo`: the continuation's echo would be the extended prompt. */
  | 'echo'
  /** Completions `suffix`: fill-in-the-middle is not a continuation of text. */
  | 'suffix'
  /** Asked or streamed logprobs: the continued prefix's would be missing or re-scored. */
  | 'logprobs'
  /** `tool_calls` already streamed: a half-sent call cannot be continued as message text. */
  | 'tool_calls'
  /** Reasoning streamed (`reasoning_content`, vLLM's `reasoning`): its think tags are the model's, unknown to fleetgate. */
  | 'reasoning'
  /** The body is not one the continuation can be built from (not JSON, token ids, several prompts). */
  | 'unbuildable'
  /** `retry.resume_limit` continuations were already made. */
  | 'limit'
  /** No ready backend of the model and class within `retry.resume_wait`. */
  | 'no_backend'
  /** The continuation was answered with something other than a 200 event stream. */
  | 'rejected';

/** A request body, parsed. */
export type Body = Record<string, unknown>;

/** The API of a request that may be resumed (OpenAI chat or completions); null for any other path. */
export function apiOf(path: string): ResumeApi | null {
  const api = generationApiOf(path);
  return api === 'generate' ? null : api;
}

const CONSTRAINED = ['json_schema', 'regex', 'ebnf', 'structural_tag'];

/** Why this request can never be continued, whatever it streamed; null if it can. */
export function bodyRefusal(api: ResumeApi, body: unknown): ResumeRefusal | null {
  if (!isObject(body)) return 'unbuildable';
  if ((typeof body.n === 'number' && body.n > 1) || (typeof body.best_of === 'number' && body.best_of > 1)) return 'n';
  const format = body.response_format;
  if (isObject(format) && format.type !== undefined && format.type !== 'text') return 'constrained';
  for (const key of Object.keys(body)) {
    if (body[key] == null) continue;
    if (CONSTRAINED.includes(key) || key.startsWith('guided_')) return 'constrained';
  }
  if (body.echo === true) return 'echo';
  if (typeof body.suffix === 'string' && body.suffix !== '') return 'suffix';
  if (body.logprobs === true || typeof body.logprobs === 'number') return 'logprobs';
  if (typeof body.top_logprobs === 'number' && body.top_logprobs > 0) return 'logprobs';
  if (api === 'chat') {
    if (!Array.isArray(body.messages) || body.messages.length === 0) return 'unbuildable';
    return prefillHasNonText(body) ? 'unbuildable' : null;
  }
  const prompt = body.prompt;
  if (typeof prompt === 'string') return null;
  return Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === 'string' ? null : 'unbuildable';
}

/**
 * The client prefilled the answer (`continue_final_message`) with a content part that is not text (an
 * image, a refusal): the continuation's text cannot be appended to it.
 */
function prefillHasNonText(body: Body): boolean {
  if (body.continue_final_message !== true) return false;
  const last = (body.messages as unknown[])[(body.messages as unknown[]).length - 1];
  if (!isObject(last) || last.role !== 'assistant' || !Array.isArray(last.content)) return false;
  return last.content.some((part) => !isObject(part) || typeof part.text !== 'string');
}

const BUDGET_KEYS = ['max_tokens', 'max_completion_tokens'] as const;

/** Output tokens the original request still allows after `generated`; null when it set no limit. */
export function remainingBudget(body: Body, generated: number): number | null {
  let least: number | null = null;
  for (const key of BUDGET_KEYS) {
    const value = body[key];
    if (typeof value === 'number') least = Math.min(least ?? value, value - generated);
  }
  return least;
}

/**
 * The body that continues `original` after `text` (`generated` tokens) reached the client: chat gets
 * the text as a final assistant message to continue; completions get it appended to the prompt.
 * Every other field (sampling parameters, `stop`, `seed`, `priority`, `stream_options`) is kept; the
 * output budgets shrink by what was generated. Nothing generated yet: the original body as it was.
 */
export function continuationBody(api: ResumeApi, original: Body, text: string, generated: number): Body {
  if (text === '' && generated === 0) return original;
  const body: Body = { ...original };
  for (const key of [...BUDGET_KEYS, 'min_tokens'] as const) {
    const value = original[key];
    if (typeof value === 'number') body[key] = Math.max(key === 'min_tokens' ? 0 : 1, value - generated);
  }
  if (api === 'completion') {
    const prompt = original.prompt;
    body.prompt = typeof prompt === 'string' ? prompt + text : [(prompt as string[])[0] + text];
    return body;
  }
  const messages = [...(original.messages as unknown[])];
  const last = messages[messages.length - 1];
  if (original.continue_final_message === true && isObject(last) && last.role === 'assistant') {
    // The client itself prefilled the answer: the text continues that message.
    messages[messages.length - 1] = { ...last, content: messageText(last.content) + text };
  } else {
    messages.push({ role: 'assistant', content: text });
  }
  body.messages = messages;
  body.continue_final_message = true;
  body.add_generation_prompt = false;
  return body;
}
