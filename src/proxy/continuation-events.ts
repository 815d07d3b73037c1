/**
 * The events a continued stream is made of, pure: a continuation's event rewritten as part of the
 * original stream (its `id`, `created` and `model`; a `usage` that sums the attempts and keeps the
 * original prompt's count), and the events that end a stream whose output budget ran out at the
 * cut. The stream's reader (stream-journal.ts) holds what they are built from.
 */
import { isObject } from '../config/json-object.js';
import type { Body, ResumeApi } from './continuation.js';

/** The first attempt's `id`, `created` and `model`, which every event of the stream carries. */
export interface StreamIdentity {
  id: unknown;
  created: unknown;
  model: unknown;
}

/** What the attempts before a continuation counted: output tokens, and the prompt's when known. */
export interface CountsBefore {
  tokens: number;
  promptTokens: number | null;
}

/** A continuation's event as part of the original stream (changed in place). */
export function asOriginalStream(event: Body, identity: StreamIdentity | null, before: CountsBefore): Body {
  if (identity !== null) {
    event.id = identity.id;
    event.created = identity.created;
    event.model = identity.model;
  }
  const usage = event.usage;
  if (isObject(usage) && typeof usage.completion_tokens === 'number') {
    const completion = before.tokens + usage.completion_tokens;
    // The continuation's prompt holds the original one plus what was generated before it.
    const promptSeen = typeof usage.prompt_tokens === 'number' ? usage.prompt_tokens - before.tokens : 0;
    const prompt = before.promptTokens ?? Math.max(0, promptSeen);
    event.usage = { ...usage, prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
  }
  return event;
}

/** The events that end an `api` stream whose budget ran out at the cut, after `tokens` output tokens. */
export function lengthEndingEvents(
  api: ResumeApi | null,
  identity: StreamIdentity | null,
  counts: CountsBefore,
  includeUsage: boolean,
): string {
  const head = { ...(identity ?? { id: null, created: null, model: null }) };
  const object = api === 'chat' ? 'chat.completion.chunk' : 'text_completion';
  const choice =
    api === 'chat'
      ? { index: 0, delta: {}, logprobs: null, finish_reason: 'length' }
      : { index: 0, text: '', logprobs: null, finish_reason: 'length' };
  let out = `data: ${JSON.stringify({ ...head, object, choices: [choice] })}\n\n`;
  if (includeUsage) {
    const prompt = counts.promptTokens ?? 0;
    const usage = { prompt_tokens: prompt, completion_tokens: counts.tokens, total_tokens: prompt + counts.tokens };
    out += `data: ${JSON.stringify({ ...head, object, choices: [], usage })}\n\n`;
  }
  return `${out}data: [DONE]\n\n`;
}
