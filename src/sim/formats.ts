/**
 * Response bodies and SSE chunks in SGLang's formats (ref section 5): `/generate` with cumulative
 * streamed `text`, and the OpenAI chat / completions shapes with a finish chunk (empty delta),
 * an optional usage chunk and `data: [DONE]`. Per-request JSON heads are built once; each token
 * only serialises its own text.
 */
import type { FinishReason } from './engine.js';
import { EOS_TOKEN_ID, outputIds, outputText, outputTextFrom, tokenId, tokenText } from './text-gen.js';
import {
  generatedIds,
  generatedSpan,
  generatedToken,
  ThinkingChatDeltas,
  type ThinkingJob,
  thinkingMessage,
  thinkingUsage,
} from './thinking-format.js';

export type Api = 'generate' | 'chat' | 'completion';

export interface Job {
  api: Api;
  rid: string;
  model: string;
  /** Unix seconds. */
  created: number;
  stream: boolean;
  includeUsage: boolean;
  promptTokens: number;
  /** Answer tokens the prompt already held (a continuation): the first generated token's number. */
  offset: number;
  /** Prompt tokens found in the server's prefix cache; known once the request is admitted. */
  cachedTokens: number;
  startedMs: number;
  /** Thinking mode: the answer's script and how its engine writes it (thinking-format.ts). */
  thinking?: ThinkingJob;
}

export const DONE = 'data: [DONE]\n\n';

function sse(json: string): string {
  return `data: ${json}\n\n`;
}

function generateFinish(reason: FinishReason | null, generated: number): unknown {
  if (reason === null) return null;
  if (reason === 'length') return { type: 'length', length: generated };
  if (reason === 'stop') return { type: 'stop', matched: EOS_TOKEN_ID };
  return { type: 'abort', message: 'Abort request' };
}

function generateMeta(job: Job, generated: number, reason: FinishReason | null, retractions: number) {
  return {
    id: job.rid,
    finish_reason: generateFinish(reason, generated),
    prompt_tokens: job.promptTokens,
    weight_version: 'default',
    total_retractions: retractions,
    completion_tokens: generated,
    cached_tokens: job.cachedTokens,
    cached_tokens_details: null,
    dp_rank: null,
    e2e_latency: (performance.now() - job.startedMs) / 1000,
  };
}

/** `/generate` stream chunk after `generated` tokens: cumulative text, latest id only. */
/** The raw text of the first `generated` tokens: markers inline (no reasoning parser runs on the raw APIs). */
function rawText(job: Job, generated: number): string {
  return job.thinking === undefined ? outputText(generated) : generatedSpan(job.thinking, generated).raw;
}

function rawIds(job: Job, from: number, count: number): number[] {
  if (job.thinking !== undefined) return generatedIds(job.thinking, from, count);
  return from === 0 ? outputIds(count) : [tokenId(from)];
}

export function generateChunk(job: Job, generated: number, reason: FinishReason | null, retractions: number): string {
  return sse(
    JSON.stringify({
      text: rawText(job, generated),
      output_ids: generated > 0 ? rawIds(job, generated - 1, 1) : [],
      meta_info: generateMeta(job, generated, reason, retractions),
    }),
  );
}

export function generateBody(job: Job, generated: number, reason: FinishReason, retractions: number): string {
  return JSON.stringify({
    text: rawText(job, generated),
    output_ids: rawIds(job, 0, generated),
    meta_info: { ...generateMeta(job, generated, reason, retractions), response_sent_to_client_ts: Date.now() / 1000 },
  });
}

function openaiFinish(reason: FinishReason): { finish: string; matched: string } {
  return { finish: JSON.stringify(reason), matched: reason === 'stop' ? String(EOS_TOKEN_ID) : 'null' };
}

function usageJson(job: Job, generated: number): string {
  const thinking = job.thinking === undefined ? null : thinkingUsage(job.thinking, generated);
  const usage = JSON.stringify({
    prompt_tokens: job.promptTokens,
    total_tokens: job.promptTokens + generated,
    completion_tokens: generated,
    prompt_tokens_details: { cached_tokens: job.cachedTokens },
    reasoning_tokens: thinking?.reasoningTokens ?? 0,
  });
  return thinking?.details ? `${usage.slice(0, -1)},"completion_tokens_details":${thinking.details}}` : usage;
}

/** Builds the chunks of one OpenAI-style stream. */
export class OpenAiStream {
  #job: Job;
  #head: string;
  /** A thinking chat answer's deltas (reasoning, content, held reasoning). */
  #deltas: ThinkingChatDeltas | null = null;

  constructor(job: Job) {
    this.#job = job;
    const object = job.api === 'chat' ? 'chat.completion.chunk' : 'text_completion';
    this.#head = `{"id":${JSON.stringify(job.rid)},"object":"${object}","created":${job.created},"model":${JSON.stringify(job.model)},"choices":[`;
    if (job.thinking !== undefined && job.api === 'chat') {
      this.#deltas = new ThinkingChatDeltas(job.thinking, (delta) =>
        sse(
          `${this.#head}{"index":0,"delta":${delta},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}`,
        ),
      );
    }
  }

  /** vLLM in thinking mode writes only the delta keys it sets (`exclude_unset`), as thinking-format.ts does. */
  #vllmThinking(): boolean {
    return this.#job.thinking?.kind === 'vllm';
  }

  /** Chat only: the role chunk SGLang sends first. */
  first(): string {
    if (this.#job.api !== 'chat') return '';
    return sse(
      `${this.#head}{"index":0,"delta":${this.#vllmThinking() ? '{"role":"assistant","content":""}' : '{"role":"assistant","content":"","reasoning_content":null,"tool_calls":null}'},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}`,
    );
  }

  /** The chunk for the request's token number `index` (0-based; after the prompt's own answer tokens). */
  token(index: number): string {
    if (this.#deltas !== null) return this.#deltas.token(index);
    const thinking = this.#job.thinking;
    const text = JSON.stringify(
      thinking === undefined ? tokenText(this.#job.offset + index) : generatedToken(thinking, index),
    );
    if (this.#job.api === 'chat') {
      return sse(
        `${this.#head}{"index":0,"delta":{"role":null,"content":${text},"reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}`,
      );
    }
    return sse(
      `${this.#head}{"index":0,"text":${text},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}`,
    );
  }

  /** Finish chunk, the usage chunk when asked for, and `[DONE]`. */
  end(reason: FinishReason, generated: number): string {
    const { finish, matched } = openaiFinish(reason);
    const choice =
      this.#job.api === 'chat'
        ? `{"index":0,"delta":${this.#vllmThinking() ? '{}' : '{"role":null,"content":null,"reasoning_content":null,"tool_calls":null}'},"logprobs":null,"finish_reason":${finish},"matched_stop":${matched}}`
        : `{"index":0,"text":"","logprobs":null,"finish_reason":${finish},"matched_stop":${matched}}`;
    let out = (this.#deltas?.flush() ?? '') + sse(`${this.#head}${choice}],"usage":null}`);
    if (this.#job.includeUsage) out += sse(`${this.#head}],"usage":${usageJson(this.#job, generated)}}`);
    return out + DONE;
  }
}

export function openaiBody(job: Job, generated: number, reason: FinishReason): string {
  const { finish, matched } = openaiFinish(reason);
  const text = JSON.stringify(
    job.thinking === undefined ? outputTextFrom(job.offset, generated) : rawText(job, generated),
  );
  const head = `{"id":${JSON.stringify(job.rid)},"object":"${job.api === 'chat' ? 'chat.completion' : 'text_completion'}","created":${job.created},"model":${JSON.stringify(job.model)},"choices":[`;
  const choice =
    job.api === 'chat'
      ? `{"index":0,"message":${job.thinking === undefined ? `{"role":"assistant","content":${text},"reasoning_content":null,"tool_calls":null}` : thinkingMessage(job.thinking, generated)},"logprobs":null,"finish_reason":${finish},"matched_stop":${matched}}`
      : `{"index":0,"text":${text},"logprobs":null,"finish_reason":${finish},"matched_stop":${matched}}`;
  return `${head}${choice}],"usage":${usageJson(job, generated)},"metadata":{"weight_version":"default"}}`;
}

/** SGLang's `ErrorResponse` for a bad request. */
export function errorBody(message: string, code = 400, type = 'BadRequestError'): string {
  return JSON.stringify({ object: 'error', message, type, param: null, code });
}
