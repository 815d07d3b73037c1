/**
 * One generation request (`/generate`, `/v1/completions`, `/v1/chat/completions`): validate the body,
 * run it through the engine, stream or answer it. A client that goes away is aborted at once,
 * freeing its batch slot and KV (SGLang aborts on disconnect too, ref 5, only a few seconds later).
 */
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Engine, EngineRequest, FinishReason } from './engine.js';
import {
  type Api,
  DONE,
  errorBody,
  generateBody,
  generateChunk,
  type Job,
  OpenAiStream,
  openaiBody,
} from './formats.js';
import { type PageKeys, prefixKeys, tokenPageKeys } from './prefix-cache.js';
import { CONTEXT_LEN } from './presets.js';
import { answerTarget, type Continued, continuedFrom, countPromptTokens, outputTextFrom } from './text-gen.js';
import { scriptSpan } from './thinking.js';
import type { ThinkingJob } from './thinking-format.js';
import { chatPlan, continuationPlan, type ThinkingConfig, type ThinkingPlan } from './thinking-prompt.js';
import type { SimCounters } from './types.js';

export interface GenerationHost {
  /** The server's name (`gpu3`), sent as `x-sim-engine` so a test or soak client sees which engine answered. */
  readonly name: string;
  readonly engine: Engine;
  readonly counters: SimCounters;
  readonly model: string;
  /** Sent back as `x-sim-server` on generation answers: which server answered (bench and test traces). */
  readonly serverName: string;
  readonly defaultMaxTokens: number;
  readonly kind?: 'sglang' | 'vllm';
  /** Thinking mode (`--reasoning-parser`, `--model-path`); null or absent: answers as without it. */
  readonly thinking?: ThinkingConfig | null;
  /**
   * With KV events on: the token ids of a prompt's text (the model's tokenizer, else one stand-in id
   * per four characters), so that cache pages carry the tokens the events publish.
   */
  readonly kvTokens?: ((text: string) => readonly number[]) | null;
  /** Live requests by rid, for `/abort_request`. */
  readonly active: Map<string, EngineRequest>;
  /** True while the server itself is dropping connections (a crash is not a client disconnect). */
  dying(): boolean;
  clientGone(): void;
}

export interface GenerationSpec {
  job: Job;
  /** Keys of the prompt's full cache pages; the last token is always computed, as in SGLang. */
  prefixKeys: PageKeys;
  /** Keys of the prompt and its answer's full pages once the answer is done (EngineRequest.answerKeys). */
  answerKeys?: (generated: number) => PageKeys;
  maxTokens: number;
  target: number;
  stopReason: 'length' | 'stop';
  /** The request's `priority` (SGLang's priority scheduling), if it names one. */
  priority?: number;
}

type Body = Record<string, unknown>;

export const JSON_HEADERS = { 'content-type': 'application/json', server: 'uvicorn' } as const;
const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  server: 'uvicorn',
} as const;

function textOf(value: unknown): string {
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return value.map(textOf).join(' ');
  if (value && typeof value === 'object' && 'text' in value) return textOf((value as Body).text);
  return '';
}

interface Prompt {
  text: string;
  tokens: number;
  /** What the chat template would render, in order: the prompt's identity for the prefix cache. */
  rendered: string;
  /**
   * The prompt and its first `generated` answer tokens as text, what the engine caches when the
   * answer is done (SGLang inserts the prompt and output into its radix cache); not for token ids.
   */
  answered?: (generated: number) => string;
  /** Answer tokens the prompt already holds (a continuation): generation goes on from this token number. */
  offset: number;
  /** Thinking mode: the answer's script and where this request starts in it. */
  thinking?: ThinkingPlan;
}

/** Tool definitions first, then each message's role and content, as a chat template renders them. */
function renderChat(messages: readonly unknown[], tools: unknown): string {
  let out = Array.isArray(tools) && tools.length > 0 ? `<tools>${JSON.stringify(tools)}</tools>\n` : '';
  for (const m of messages) {
    const message = (m ?? {}) as Body;
    out += `<|${String(message.role)}|>${textOf(message.content)}\n`;
  }
  return out;
}

/** The simulator's stand-in for a chat template and tokenizer: the prompt's text, rendering and size. */
export function standInChat(
  messages: readonly unknown[],
  tools: unknown,
): { text: string; rendered: string; tokens: number } {
  const text = messages.map((m) => textOf((m as Body | null)?.content)).join('\n');
  return { text, rendered: renderChat(messages, tools), tokens: countPromptTokens(text) + 4 * messages.length };
}

/** A thinking-mode prompt: the plan reads the prompt; `<sim:len=N>` is read in its conversation. */
function thinkingPrompt(plan: ThinkingPlan): Prompt {
  return {
    text: plan.conversation,
    tokens: plan.promptTokens,
    rendered: plan.rendered,
    offset: plan.offset,
    thinking: plan,
    // The raw output, think block and all: the engine caches what it generated.
    answered: (generated) => plan.rendered + scriptSpan(plan.script, plan.offset, generated).raw,
  };
}

function promptOf(api: Api, body: Body, thinking: ThinkingConfig | null): Prompt | string {
  if (api === 'chat') {
    const messages = body.messages;
    if (!Array.isArray(messages) || messages.length === 0) return 'messages: Field required (a non-empty list)';
    if (thinking !== null && body.continue_final_message !== true) {
      const kwargs = body.chat_template_kwargs as Record<string, unknown> | undefined;
      return thinkingPrompt(chatPlan(thinking, messages, kwargs, body.tools, standInChat(messages, body.tools)));
    }
    const continued = continuedChat(messages, body);
    if (typeof continued === 'string') return continued;
    const asked = continued === null ? messages : messages.slice(0, -1);
    const text = asked.map((m) => textOf((m as Body | null)?.content)).join('\n');
    const rendered = renderChat(messages, body.tools);
    // The final assistant message's own tokens: its answer part counts one per token, as generated.
    const own =
      continued === null ? 0 : (continued.before === '' ? 0 : countPromptTokens(continued.before)) + continued.tokens;
    return {
      text: continued === null ? text : `${text}\n${continued.before}`,
      tokens: countPromptTokens(text) + 4 * asked.length + own,
      rendered,
      answered: (generated) => `${rendered}<|assistant|>${outputTextFrom(continued?.tokens ?? 0, generated)}\n`,
      offset: continued?.tokens ?? 0,
    };
  }
  const field = api === 'generate' ? (body.text ?? body.input_ids) : body.prompt;
  if (field === undefined || field === null) {
    return api === 'generate' ? 'Either text, input_ids or input_embeds should be provided.' : 'prompt: Field required';
  }
  const ids = Array.isArray(field) && field.every((x) => typeof x === 'number') ? (field as number[]) : null;
  if (thinking !== null && (ids !== null || typeof field === 'string')) {
    const plan = continuationPlan(thinking, ids ?? (field as string));
    if (plan !== null) return thinkingPrompt(plan);
  }
  if (ids !== null) return { text: '', tokens: Math.max(1, ids.length), rendered: ids.join(','), offset: 0 };
  const text = textOf(field);
  // A completions prompt that ends with the start of the simulated answer is that answer continued
  // (so a fresh prompt must not end with " Paris", the answer's first word: docs/stream-resume.md).
  const continued = api === 'completion' && typeof field === 'string' ? continuedFrom(text) : null;
  const tokens =
    continued === null || continued.tokens === 0
      ? countPromptTokens(text)
      : (continued.before === '' ? 0 : countPromptTokens(continued.before)) + continued.tokens;
  const offset = continued?.tokens ?? 0;
  return { text, tokens, rendered: text, answered: (generated) => text + outputTextFrom(offset, generated), offset };
}

/**
 * vLLM's and SGLang's `continue_final_message`: the final assistant message is the start of the
 * answer, rendered without an end-of-turn, and generation goes on from it (`add_generation_prompt`
 * must then be false). Null: not a continuation; a string: the 400 message.
 */
function continuedChat(messages: readonly unknown[], body: Body): Continued | null | string {
  if (body.continue_final_message !== true) return null;
  if (body.add_generation_prompt === true) {
    return 'Cannot set both `continue_final_message` and `add_generation_prompt` to True.';
  }
  const last = (messages[messages.length - 1] ?? {}) as Body;
  if (last.role !== 'assistant') return 'continue_final_message requires the final message to be from the assistant.';
  return continuedFrom(textOf(last.content));
}

/** How this request's thinking answer is written: the parser runs on chat requests only. */
function thinkingJob(host: GenerationHost, api: Api, body: Body, plan: ThinkingPlan): ThinkingJob {
  const config = host.thinking as ThinkingConfig;
  const ids = new Map<string, number>();
  const model = config.model;
  return {
    plan,
    kind: host.kind ?? 'sglang',
    vllmField: config.vllmField,
    separate: config.parser !== null && api === 'chat' && (host.kind === 'vllm' || body.separate_reasoning !== false),
    streamReasoning: body.stream_reasoning !== false,
    tokenId: (text) => {
      let id = ids.get(text);
      if (id === undefined) {
        id = model === null ? 1000 + ids.size : model.encode(text)[0];
        ids.set(text, id);
      }
      return id;
    },
  };
}

function positiveInt(value: unknown, name: string): number | string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0)
    return `${name} must be a non-negative integer`;
  return Math.max(1, value);
}

/** A validated request, or the message for a 400. */
export function parseGeneration(api: Api, body: unknown, host: GenerationHost): GenerationSpec | string {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    return 'The request body must be a JSON object.';
  const b = body as Body;
  const prompt = promptOf(api, b, host.thinking ?? null);
  if (typeof prompt === 'string') return prompt;
  const params = (api === 'generate' ? b.sampling_params : b) as Body | undefined;
  const requested =
    api === 'generate'
      ? positiveInt(params?.max_new_tokens, 'max_new_tokens')
      : positiveInt(b.max_completion_tokens ?? b.max_tokens, 'max_tokens');
  if (typeof requested === 'string') return requested;
  if (!host.engine.fits(prompt.tokens)) {
    return `The input (${prompt.tokens} tokens) is longer than the model's context length (${host.engine.maxTotalNumTokens} tokens).`;
  }
  const maxTokens = requested ?? host.defaultMaxTokens;
  // SGLang refuses what cannot fit the context window, rather than generating until it would.
  if (prompt.tokens + maxTokens > CONTEXT_LEN) {
    return `Requested token count exceeds the model's maximum context length of ${CONTEXT_LEN} tokens. You requested a total of ${prompt.tokens + maxTokens} tokens: ${prompt.tokens} tokens from the input messages and ${maxTokens} tokens for the completion.`;
  }
  // A `<sim:len=N>` answer ends after N tokens in all, however many the prompt already holds.
  const { target, stopReason } = answerTarget(prompt.text, prompt.offset, maxTokens);
  const streamOptions = b.stream_options as Body | undefined;
  const rid = typeof b.rid === 'string' ? b.rid : randomUUID().replaceAll('-', '');
  const page = host.engine.pageSize;
  const answered = prompt.answered;
  const kvTokens = host.kvTokens ?? null;
  const keysOf = (text: string, size: number, max: number): PageKeys =>
    kvTokens === null ? prefixKeys(text, size, max) : tokenPageKeys(kvTokens(text), size, max);
  return {
    job: {
      api,
      rid,
      model: typeof b.model === 'string' ? b.model : host.model,
      created: Math.floor(Date.now() / 1000),
      stream: b.stream === true,
      includeUsage: streamOptions?.include_usage === true,
      promptTokens: prompt.tokens,
      offset: prompt.offset,
      cachedTokens: 0,
      startedMs: performance.now(),
      thinking: prompt.thinking === undefined ? undefined : thinkingJob(host, api, b, prompt.thinking),
    },
    prefixKeys: keysOf(prompt.rendered, page, Math.floor((prompt.tokens - 1) / page)),
    ...(answered === undefined
      ? {}
      : {
          answerKeys: (generated: number) =>
            keysOf(answered(generated), page, Math.floor((prompt.tokens + generated - 1) / page)),
        }),
    maxTokens,
    target,
    stopReason,
    priority: typeof b.priority === 'number' && Number.isInteger(b.priority) ? b.priority : undefined,
  };
}

export function sendError(res: ServerResponse, message: string, status = 400): void {
  const body = errorBody(message, status);
  res.writeHead(status, { ...JSON_HEADERS, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** Runs a validated request to completion, abort or disconnect. */
export function runGeneration(
  host: GenerationHost,
  res: ServerResponse,
  spec: GenerationSpec,
  /** Called when the response head goes out (the uvicorn access line). */
  onHead: () => void,
): void {
  const { job } = spec;
  const openai = job.api === 'generate' ? null : new OpenAiStream(job);
  let done = false;
  const writable = () => !res.destroyed && !res.writableEnded;
  res.setHeader('x-sim-server', host.serverName);

  res.setHeader('x-sim-engine', host.name);
  if (job.stream) {
    res.writeHead(200, SSE_HEADERS);
    res.flushHeaders();
    onHead();
    host.counters.openStreams++;
    res.once('close', () => host.counters.openStreams--);
  }

  const request: EngineRequest = {
    id: job.rid,
    promptTokens: job.promptTokens,
    maxTokens: spec.maxTokens,
    targetTokens: spec.target,
    stopReason: spec.stopReason,
    prefixKeys: spec.prefixKeys,
    answerKeys: spec.answerKeys,
    priority: spec.priority,
    generated: 0,
    retractions: 0,
    onToken(r) {
      host.counters.generatedTokens++;
      job.cachedTokens = r.cachedTokens ?? 0;
      if (!job.stream || !writable()) return;
      const last = r.generated >= r.targetTokens;
      if (openai) {
        res.write(r.generated === 1 ? openai.first() + openai.token(0) : openai.token(r.generated - 1));
      } else if (!last) {
        // The last /generate chunk carries the finish reason; it is written by onFinish.
        res.write(generateChunk(job, r.generated, null, r.retractions));
      }
    },
    onFinish(r, reason: FinishReason) {
      done = true;
      host.counters.held--;
      job.cachedTokens = r.cachedTokens ?? 0;
      if (host.active.get(job.rid) === r) host.active.delete(job.rid);
      if (reason === 'abort') host.counters.aborted++;
      else {
        host.counters.completed++;
        host.counters.promptTokens += job.promptTokens;
        host.counters.cachedTokens += job.cachedTokens;
      }
      if (!writable()) return;
      if (job.stream) {
        res.end(
          openai ? openai.end(reason, r.generated) : generateChunk(job, r.generated, reason, r.retractions) + DONE,
        );
        return;
      }
      const body = openai
        ? openaiBody(job, r.generated, reason)
        : generateBody(job, r.generated, reason, r.retractions);
      res.writeHead(200, { ...JSON_HEADERS, 'content-length': Buffer.byteLength(body) });
      onHead();
      res.end(body);
    },
  };

  res.on('close', () => {
    if (done || host.dying()) return;
    host.counters.clientDisconnects++;
    host.clientGone();
    host.engine.abort(request);
  });
  host.active.set(job.rid, request);
  const c = host.counters;
  c.held++;
  if (c.held > c.peakHeld) c.peakHeld = c.held;
  host.engine.submit(request);
}
