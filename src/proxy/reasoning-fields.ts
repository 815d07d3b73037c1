/**
 * The names a chat stream's reasoning goes by, in one table: SGLang's and older vLLM's
 * `reasoning_content`, newer vLLM's `reasoning` (docs/sglang-vllm-behaviour.md, "Thinking mode").
 * The stream shape a chat stream is read with (sse-event.ts) and its count of generated text
 * (generated-text.ts) derive from it, so a new name is added here once.
 */

export const REASONING_FIELDS = ['reasoning_content', 'reasoning'] as const;

export type ReasoningField = (typeof REASONING_FIELDS)[number];
