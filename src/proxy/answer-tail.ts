/**
 * What the last bytes of an answer (the relay's `tail`, response-relay.ts) say: its usage figures
 * and finish reason, found by scanning backwards, without parsing the body (it may be megabytes).
 */

const COMPLETION_TOKENS = Buffer.from('"completion_tokens"');
const PROMPT_TOKENS = Buffer.from('"prompt_tokens"');
const REASONING_TOKENS = Buffer.from('"reasoning_tokens"');
const FINISH_REASON = Buffer.from('"finish_reason":"');

/** The last `completion_tokens` figure in the tail (OpenAI `usage`, SGLang `meta_info`). */
export function completionTokensIn(tail: Buffer | null): number | null {
  return figureIn(tail, COMPLETION_TOKENS);
}

/** The last `prompt_tokens` figure in the tail. */
export function promptTokensIn(tail: Buffer | null): number | null {
  return figureIn(tail, PROMPT_TOKENS);
}

/**
 * The last `reasoning_tokens` figure in the tail: SGLang's top-level `usage.reasoning_tokens`, vLLM's
 * `usage.completion_tokens_details.reasoning_tokens` (docs/sglang-vllm-behaviour.md, section 8).
 */
export function reasoningTokensIn(tail: Buffer | null): number | null {
  return figureIn(tail, REASONING_TOKENS);
}

/** The last non-null `finish_reason` in the tail. */
export function finishReasonIn(tail: Buffer | null): string | null {
  if (tail === null) return null;
  const at = tail.lastIndexOf(FINISH_REASON);
  if (at < 0) return null;
  const start = at + FINISH_REASON.length;
  const end = tail.indexOf(0x22, start);
  return end > start ? tail.toString('utf8', start, end) : null;
}

function figureIn(tail: Buffer | null, key: Buffer): number | null {
  if (tail === null) return null;
  const at = tail.lastIndexOf(key);
  if (at < 0) return null;
  let i = at + key.length;
  while (i < tail.length && (tail[i] === 0x20 || tail[i] === 0x3a) /* : */) i++;
  let value = 0;
  let digits = 0;
  for (; i < tail.length && tail[i] >= 0x30 && tail[i] <= 0x39; i++, digits++) value = value * 10 + tail[i] - 0x30;
  return digits > 0 ? value : null;
}
