/**
 * The names a chat stream's reasoning goes by, in one table: SGLang's and older vLLM's
 * `reasoning_content`, newer vLLM's `reasoning` (docs/sglang-vllm-behaviour.md, "Thinking mode").
 * The journal's fast path, its full read and the token clock's byte search all derive from it, so
 * a new name is added here once.
 */

export const REASONING_FIELDS = ['reasoning_content', 'reasoning'] as const;

export type ReasoningField = (typeof REASONING_FIELDS)[number];
