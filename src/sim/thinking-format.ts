/**
 * How a thinking-mode answer reads on the wire, per engine: SGLang's chat deltas
 * (`reasoning_content`, `separate_reasoning`, `stream_reasoning: false` buffering, top-level
 * `usage.reasoning_tokens`), vLLM's (`reasoning` or `reasoning_content` by version,
 * `completion_tokens_details.reasoning_tokens` in the newest), and the raw text with the markers
 * inline that `/generate` and `/v1/completions` return (no reasoning parser runs there). Facts and
 * sources: docs/sglang-vllm-behaviour.md, "Thinking mode (reasoning parsers)".
 */

import { type ScriptSpan, scriptSpan, scriptToken, THINK_OPEN, type VllmReasoningField } from './thinking.js';
import type { ThinkingPlan } from './thinking-prompt.js';

export interface ThinkingJob {
  readonly plan: ThinkingPlan;
  readonly kind: 'sglang' | 'vllm';
  /** vLLM's field(s); SGLang always writes `reasoning_content`. */
  readonly vllmField: VllmReasoningField;
  /** The reasoning parser splits this answer (a chat request with `separate_reasoning` not false). */
  readonly separate: boolean;
  /** SGLang's `stream_reasoning` (default true): false holds the reasoning back until `</think>`. */
  readonly streamReasoning: boolean;
  /** The id of one script token's text (the model's tokenizer, or the simulator's stand-in ids). */
  readonly tokenId: (text: string) => number;
}

/** The script positions one request generated: `generated` tokens after the prompt's own. */
export function generatedSpan(job: ThinkingJob, generated: number): ScriptSpan {
  return scriptSpan(job.plan.script, job.plan.offset, generated);
}

/** The raw text of the request's token number `index` (0-based). */
export function generatedToken(job: ThinkingJob, index: number): string {
  return scriptToken(job.plan.script, job.plan.offset + index).text;
}

export function generatedIds(job: ThinkingJob, from: number, count: number): number[] {
  const ids: number[] = [];
  for (let j = from; j < from + count; j++)
    ids.push(job.tokenId(scriptToken(job.plan.script, job.plan.offset + j).text));
  return ids;
}

function reasoningKeys(job: ThinkingJob): string[] {
  if (job.kind === 'sglang') return ['reasoning_content'];
  return job.vllmField === 'both' ? ['reasoning', 'reasoning_content'] : [job.vllmField];
}

/** One delta's JSON: SGLang writes every key (nulls included); vLLM only the set ones (`exclude_unset`). */
function delta(job: ThinkingJob, reasoning: string | null, content: string | null): string {
  if (job.kind === 'sglang') {
    return `{"role":null,"content":${JSON.stringify(content)},"reasoning_content":${JSON.stringify(reasoning)},"tool_calls":null}`;
  }
  if (content !== null) return `{"content":${JSON.stringify(content)}}`;
  return `{${reasoningKeys(job)
    .map((key) => `"${key}":${JSON.stringify(reasoning)}`)
    .join(',')}}`;
}

/**
 * The chat deltas of one streamed thinking answer, one token at a time. A marker token writes no
 * chunk (its text is in neither field); with `separate_reasoning: false` every token's raw text is
 * `content`, markers included.
 */
export class ThinkingChatDeltas {
  readonly #job: ThinkingJob;
  readonly #chunk: (delta: string) => string;
  /** `stream_reasoning: false`: what SGLang's detector holds. It keeps the `<think>` it saw (see the doc). */
  #held = '';
  #holding = false;

  constructor(job: ThinkingJob, chunk: (delta: string) => string) {
    this.#job = job;
    this.#chunk = chunk;
  }

  /** The SSE text for the request's token number `index` (0-based), possibly none. */
  token(index: number): string {
    const job = this.#job;
    const { text, part } = scriptToken(job.plan.script, job.plan.offset + index);
    if (!job.separate) return this.#chunk(delta(job, null, text));
    const holds = job.kind === 'sglang' && !job.streamReasoning;
    if (holds && (part === 'reasoning' || text === THINK_OPEN)) {
      this.#held += text;
      this.#holding = true;
      return '';
    }
    if (part === 'marker') {
      if (!this.#holding) return '';
      const held = this.#held;
      this.#held = '';
      this.#holding = false;
      return held === '' ? '' : this.#chunk(delta(job, held, null));
    }
    return this.#chunk(part === 'reasoning' ? delta(job, text, null) : delta(job, null, text));
  }

  /** At the end of the stream: reasoning still held (a length cut inside the think block), without its `<think>`. */
  flush(): string {
    const held = this.#held.startsWith(THINK_OPEN) ? this.#held.slice(THINK_OPEN.length) : this.#held;
    this.#held = '';
    this.#holding = false;
    return held === '' ? '' : this.#chunk(delta(this.#job, held, null));
  }
}

/** The non-streamed `message`: SGLang's `content` is never null, vLLM's is when empty. */
export function thinkingMessage(job: ThinkingJob, generated: number): string {
  const span = generatedSpan(job, generated);
  if (!job.separate) {
    return `{"role":"assistant","content":${JSON.stringify(span.raw)},"reasoning_content":null,"tool_calls":null}`;
  }
  const reasoning = span.reasoning === '' ? null : span.reasoning;
  if (job.kind === 'sglang') {
    return `{"role":"assistant","content":${JSON.stringify(span.content)},"reasoning_content":${JSON.stringify(reasoning)},"tool_calls":null}`;
  }
  const content = span.content === '' ? null : span.content;
  const fields = reasoningKeys(job)
    .map((key) => `"${key}":${JSON.stringify(reasoning)}`)
    .join(',');
  return `{"role":"assistant","content":${JSON.stringify(content)},${fields},"tool_calls":[]}`;
}

/**
 * What a thinking chat answer adds to `usage`: SGLang counts the tokens up to and including
 * `</think>` in a top-level `reasoning_tokens` (chat requests only: they set `require_reasoning`);
 * the newest vLLM counts the reasoning part, markers excluded, in `completion_tokens_details`.
 */
export function thinkingUsage(
  job: ThinkingJob,
  generated: number,
): { reasoningTokens: number; details: string | null } {
  if (!job.separate) return { reasoningTokens: 0, details: null };
  const span = generatedSpan(job, generated);
  if (job.kind === 'sglang') return { reasoningTokens: span.untilClose, details: null };
  const details = job.vllmField === 'reasoning' ? `{"reasoning_tokens":${span.reasoningPart}}` : null;
  return { reasoningTokens: 0, details };
}
