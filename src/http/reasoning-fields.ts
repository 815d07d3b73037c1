/**
 * The names a chat stream's reasoning goes by, in one table: SGLang's and older vLLM's
 * `reasoning_content`, newer vLLM's `reasoning` (docs/sglang-vllm-behaviour.md, "Thinking mode").
 * The traffic path's stream shape (proxy/sse-event.ts), its count of generated text
 * (proxy/generated-text.ts) and the batch's assembly of a streamed answer (batch/stream-assembler.ts)
 * derive from it, so a new name is added here once.
 */

export const REASONING_FIELDS = ['reasoning_content', 'reasoning'] as const;

export type ReasoningField = (typeof REASONING_FIELDS)[number];
