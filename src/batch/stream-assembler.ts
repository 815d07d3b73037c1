/**
 * A batch request sent upstream streamed, read back as the engine's non-streamed answer. A batch
 * line wants one whole answer, but only a stream can be resumed on another engine when its engine
 * dies (proxy/stream-resume.ts): so the sender asks for `stream: true` (with
 * `stream_options.include_usage`) and this module assembles the SSE events into the body the engine
 * would have answered non-streamed: `chat.completion` with `message.{role, content, reasoning
 * field(s) the stream used, tool_calls}`, or `text_completion` with `text`; `finish_reason`, the
 * choice's other final keys (SGLang's `matched_stop`, vLLM's `stop_reason`) and `usage` as the
 * stream sent them. A stream that sent an error event, or ended before its finish and `[DONE]`, is
 * not an answer. Pure: batch-sender.ts feeds it the bytes. Which requests stream: `streamable`.
 */
import { isObject } from '../config/json-object.js';
import { eventData } from '../http/event-stream.js';
import { REASONING_FIELDS, type ReasoningField } from '../http/reasoning-fields.js';
import type { BatchUrl } from './batch-input.js';

export type StreamApi = 'chat' | 'completion';

export type Assembled = { ok: true; body: Record<string, unknown> } | { ok: false; reason: string; body: unknown };

/** Choice keys the assembler builds itself; any other key of a choice is kept as the last chunk sent it. */
const BUILT_KEYS = new Set(['index', 'delta', 'text', 'logprobs', 'finish_reason', 'message']);

/** The API a batch line streams under, or null: sent as it is (embeddings, `n > 1`, logprobs, a stream already, echo). */
export function streamable(url: BatchUrl, body: Readonly<Record<string, unknown>>): StreamApi | null {
  const api = url === '/v1/chat/completions' ? 'chat' : url === '/v1/completions' ? 'completion' : null;
  if (api === null) return null;
  if (body.stream === true) return null;
  const n = body.n ?? 1;
  if (n !== 1) return null;
  const bestOf = body.best_of ?? 1;
  if (bestOf !== 1 && bestOf !== null) return null;
  for (const key of ['logprobs', 'top_logprobs', 'echo', 'prompt_logprobs'] as const) {
    const value = body[key];
    if (value !== undefined && value !== null && value !== false) return null;
  }
  return api;
}

/** The body to send upstream: the line's own, streamed, with the usage chunk asked for. */
export function streamedBody(body: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const options = isObject(body.stream_options) ? body.stream_options : {};
  return { ...body, stream: true, stream_options: { ...options, include_usage: true } };
}

interface ToolCall {
  id: unknown;
  type: unknown;
  name: string;
  arguments: string;
}

function errorMessage(payload: Record<string, unknown>): string | null {
  if (payload.object === 'error') return typeof payload.message === 'string' ? payload.message : 'error';
  const error = payload.error;
  if (error === undefined || error === null) return null;
  if (isObject(error) && typeof error.message === 'string') return error.message;
  return typeof error === 'string' ? error : 'error';
}

export class StreamAssembler {
  readonly #api: StreamApi;
  #buffer = '';
  #head: { id: unknown; created: unknown; model: unknown } | null = null;
  #text = '';
  #reasoning = '';
  /** The reasoning field names the stream wrote (SGLang: `reasoning_content`; vLLM: either or both). */
  readonly #reasoningKeys = new Set<ReasoningField>();
  /** The stream wrote every delta key, nulls included (SGLang), rather than only the set ones (vLLM). */
  #allKeys = false;
  readonly #tools = new Map<number, ToolCall>();
  #finish: unknown = null;
  readonly #choiceExtra: Record<string, unknown> = {};
  #usage: unknown = null;
  #done = false;
  #error: { message: string; payload: unknown } | null = null;

  constructor(api: StreamApi) {
    this.#api = api;
  }

  /** More of the stream's text (any split: events are framed here). */
  push(chunk: string): void {
    this.#buffer += chunk.includes('\r') ? chunk.replaceAll('\r\n', '\n') : chunk;
    let end = this.#buffer.indexOf('\n\n');
    while (end !== -1) {
      this.#event(this.#buffer.slice(0, end));
      this.#buffer = this.#buffer.slice(end + 2);
      end = this.#buffer.indexOf('\n\n');
    }
  }

  #event(event: string): void {
    const data = eventData(event);
    if (data === '') return;
    if (data === '[DONE]') {
      this.#done = true;
      return;
    }
    let payload: unknown;
    try {
      payload = JSON.parse(data);
    } catch {
      this.#error ??= { message: 'an event is not JSON', payload: data };
      return;
    }
    if (!isObject(payload)) return;
    const message = errorMessage(payload);
    if (message !== null) {
      this.#error ??= { message, payload };
      return;
    }
    this.#head ??= { id: payload.id, created: payload.created, model: payload.model };
    if (payload.usage !== undefined && payload.usage !== null) this.#usage = payload.usage;
    if (!Array.isArray(payload.choices)) return;
    for (const choice of payload.choices) if (isObject(choice)) this.#choice(choice);
  }

  #choice(choice: Record<string, unknown>): void {
    if (this.#api === 'chat') {
      if (isObject(choice.delta)) this.#delta(choice.delta);
    } else if (typeof choice.text === 'string') {
      this.#text += choice.text;
    }
    if (choice.finish_reason !== undefined && choice.finish_reason !== null) this.#finish = choice.finish_reason;
    for (const [key, value] of Object.entries(choice)) {
      if (BUILT_KEYS.has(key)) continue;
      if (value !== null || !(key in this.#choiceExtra)) this.#choiceExtra[key] = value;
    }
  }

  #delta(delta: Record<string, unknown>): void {
    if ('tool_calls' in delta) this.#allKeys = true;
    if (typeof delta.content === 'string') this.#text += delta.content;
    for (const field of REASONING_FIELDS) {
      if (!(field in delta)) continue;
      this.#reasoningKeys.add(field);
      const text = delta[field];
      // vLLM writes its two names with the same text: read the first one only.
      if (typeof text === 'string' && field === this.#firstReasoningKey(delta)) this.#reasoning += text;
    }
    if (Array.isArray(delta.tool_calls)) {
      for (const call of delta.tool_calls) if (isObject(call)) this.#toolCall(call);
    }
  }

  #firstReasoningKey(delta: Record<string, unknown>): ReasoningField | null {
    return REASONING_FIELDS.find((field) => typeof delta[field] === 'string') ?? null;
  }

  #toolCall(call: Record<string, unknown>): void {
    const index = typeof call.index === 'number' ? call.index : this.#tools.size;
    const fn = isObject(call.function) ? call.function : {};
    const known = this.#tools.get(index);
    const tool = known ?? { id: call.id ?? null, type: call.type ?? 'function', name: '', arguments: '' };
    if (known !== undefined && call.id !== undefined && call.id !== null) tool.id = call.id;
    if (typeof fn.name === 'string') tool.name += fn.name;
    if (typeof fn.arguments === 'string') tool.arguments += fn.arguments;
    this.#tools.set(index, tool);
  }

  /** The stream has ended: the assembled answer, or why it is not one. */
  finish(): Assembled {
    if (this.#buffer.trim() !== '') this.push('\n\n');
    if (this.#error !== null) {
      return { ok: false, reason: `error event in the stream: ${this.#error.message}`, body: this.#error.payload };
    }
    if (this.#finish === null) return { ok: false, reason: 'stream ended before its finish', body: null };
    if (!this.#done) return { ok: false, reason: 'stream ended without [DONE]', body: null };
    const head = this.#head ?? { id: null, created: null, model: null };
    const choice =
      this.#api === 'chat'
        ? { index: 0, message: this.#message(), logprobs: null, finish_reason: this.#finish }
        : { index: 0, text: this.#text, logprobs: null, finish_reason: this.#finish };
    return {
      ok: true,
      body: {
        id: head.id,
        object: this.#api === 'chat' ? 'chat.completion' : 'text_completion',
        created: head.created,
        model: head.model,
        choices: [{ ...choice, ...this.#choiceExtra }],
        usage: this.#usage,
      },
    };
  }

  /**
   * The non-streamed `message`. SGLang (every delta key written) answers `content` as a string and
   * `tool_calls: null` when none; vLLM (only the set keys) answers `content: null` when empty and
   * `tool_calls: []`. A reasoning field the stream used is null when empty.
   */
  #message(): Record<string, unknown> {
    const message: Record<string, unknown> = {
      role: 'assistant',
      content: this.#allKeys || this.#text !== '' ? this.#text : null,
    };
    for (const field of REASONING_FIELDS) {
      if (this.#reasoningKeys.has(field)) message[field] = this.#reasoning === '' ? null : this.#reasoning;
    }
    const tools = [...this.#tools.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, tool]) => ({ id: tool.id, type: tool.type, function: { name: tool.name, arguments: tool.arguments } }));
    message.tool_calls = tools.length > 0 ? tools : this.#allKeys ? null : [];
    return message;
  }
}
