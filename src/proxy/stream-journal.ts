/**
 * The journal of one client stream across its attempts (docs/stream-resume.md). It reads the SSE
 * events as they pass (whole events only go to the client, so a cut never leaves half an event
 * behind), keeps the text and token count that reached the client, and rewrites a continuation's
 * events into the original stream: its `id`, `created` and `model`, no second `role`, a `usage`
 * that sums the attempts. Pure: stream-resume.ts does the I/O.
 */
import { isObject } from '../config/json-object.js';
import type { Body, ResumeApi, ResumeRefusal } from './continuation.js';
import { type ReasoningField, reasoningOf } from './reasoning-fields.js';
import { eventData, plainDeltaText } from './sse-event.js';

const SEPARATOR = Buffer.from('\n\n');

/** What the journal saw in one event. */
type EventKind = 'data' | 'done' | 'error' | 'other';

interface Identity {
  id: unknown;
  created: unknown;
  model: unknown;
}

/**
 * One client stream across its attempts. `feed` takes an upstream chunk and returns the bytes for
 * the client: whole events only (a partial one waits for its end), the first attempt's as they
 * came, a continuation's rewritten. It stops at an upstream error event (`errorEvent`) or `[DONE]`.
 */
export class StreamJournal {
  readonly #api: ResumeApi;
  #pending: Buffer | null = null;
  #attempt = 0;
  #identity: Identity | null = null;
  #text = '';
  /** Tokens of the attempts before the current one. */
  #before = 0;
  /** The current attempt's content events, and its own usage figure when it sent one. */
  #events = 0;
  #usage: number | null = null;
  #promptTokens: number | null = null;
  #join: string | null = null;
  #errorEvent: Buffer | null = null;
  #done = false;
  #finished = false;
  /** What was streamed that forbids a continuation (`refusal`). */
  #toolCalls = false;
  /** The reasoning that reached the client, and the field it came under (the first seen). */
  #reasoning = '';
  #reasoningField: ReasoningField | null = null;
  #logprobs = false;
  #choices = false;

  constructor(api: ResumeApi) {
    this.#api = api;
  }

  /** The raw upstream error event, once one arrived. */
  get errorEvent(): Buffer | null {
    return this.#errorEvent;
  }

  /** `[DONE]` arrived. */
  get done(): boolean {
    return this.#done;
  }

  /** A `finish_reason` arrived: the generation is whole even if `[DONE]` is lost. */
  get finished(): boolean {
    return this.#finished;
  }

  /** The text that reached the client (content deltas, or completion text). */
  get text(): string {
    return this.#text;
  }

  /** The reasoning that reached the client (chat streams of a reasoning parser). */
  get reasoning(): string {
    return this.#reasoning;
  }

  /** The delta field the reasoning came under; null before any. */
  get reasoningField(): ReasoningField | null {
    return this.#reasoningField;
  }

  /** Output tokens that reached the client: each attempt's own `usage` where sent, else one per content event. */
  get tokens(): number {
    return this.#before + (this.#usage ?? this.#events);
  }

  /** Why what was streamed forbids a continuation; null if nothing does. */
  get refusal(): ResumeRefusal | null {
    if (this.#choices) return 'n';
    if (this.#toolCalls) return 'tool_calls';
    if (this.#reasoning !== '') return 'reasoning';
    if (this.#logprobs) return 'logprobs';
    return null;
  }

  /**
   * A continuation's events follow; `join` (an SSE comment) goes out before its first. `tokensBefore`:
   * the output tokens generated so far when a tokenizer counted them (token-exact resume), else the
   * journal's own count.
   */
  beginAttempt(join: string, tokensBefore: number = this.tokens): void {
    this.#before = tokensBefore;
    this.#events = 0;
    this.#usage = null;
    this.#attempt++;
    this.#pending = null;
    this.#errorEvent = null;
    this.#join = join;
  }

  feed(chunk: Buffer): Buffer {
    if (this.#errorEvent !== null || this.#done) return EMPTY;
    const data = this.#pending === null ? chunk : Buffer.concat([this.#pending, chunk]);
    this.#pending = null;
    // One decode per chunk, up to its last whole event; the rest waits for the next chunk.
    const last = data.lastIndexOf(SEPARATOR);
    if (last < 0) {
      this.#pending = Buffer.from(data);
      return EMPTY;
    }
    const whole = last + SEPARATOR.length;
    if (whole < data.length) this.#pending = Buffer.from(data.subarray(whole));
    const text = data.toString('utf8', 0, whole);
    const out: string[] = [];
    let from = 0;
    while (from < text.length) {
      const at = text.indexOf('\n\n', from);
      const { kind, rewritten } = this.#read(text.slice(from, at));
      if (kind === 'error') {
        this.#errorEvent = Buffer.from(text.slice(from, at + 2));
        this.#pending = null;
        return this.#joined(this.#attempt === 0 ? data.subarray(0, Buffer.byteLength(text.slice(0, from))) : out);
      }
      if (this.#attempt > 0 && rewritten !== null) out.push(rewritten);
      from = at + 2;
      if (kind === 'done') {
        this.#pending = null;
        if (this.#attempt === 0 && from < text.length) return data.subarray(0, Buffer.byteLength(text.slice(0, from)));
        break;
      }
    }
    return this.#joined(this.#attempt === 0 ? data.subarray(0, whole) : out);
  }

  /** The events that end a stream whose output budget ran out exactly at the cut. */
  lengthEnding(includeUsage: boolean): string {
    const identity = this.#identity ?? { id: null, created: null, model: null };
    const choice =
      this.#api === 'chat'
        ? { index: 0, delta: {}, logprobs: null, finish_reason: 'length' }
        : { index: 0, text: '', logprobs: null, finish_reason: 'length' };
    let out = `data: ${JSON.stringify({ ...identity, object: this.#object(), choices: [choice] })}\n\n`;
    if (includeUsage) {
      const prompt = this.#promptTokens ?? 0;
      const usage = { prompt_tokens: prompt, completion_tokens: this.tokens, total_tokens: prompt + this.tokens };
      out += `data: ${JSON.stringify({ ...identity, object: this.#object(), choices: [], usage })}\n\n`;
    }
    return `${out}data: [DONE]\n\n`;
  }

  #object(): string {
    return this.#api === 'chat' ? 'chat.completion.chunk' : 'text_completion';
  }

  /** The client bytes: the first attempt's as they came, a continuation's rewritten after its join comment. */
  #joined(out: Buffer | string[]): Buffer {
    if (Buffer.isBuffer(out)) return out;
    if (out.length === 0) return EMPTY;
    if (this.#join !== null) {
      out.unshift(this.#join);
      this.#join = null;
    }
    return Buffer.from(out.join(''));
  }

  /** Reads one event (without its blank line); for a continuation, its rewritten form or null to drop it. */
  #read(text: string): { kind: EventKind; rewritten: string | null } {
    if (this.#attempt === 0 && this.#identity !== null) {
      const plain = plainDeltaText(text, this.#api === 'chat' ? 'content' : 'text');
      if (plain !== null) {
        if (plain !== '') {
          this.#text += plain;
          this.#events++;
        }
        return PASSED;
      }
    }
    if (text.startsWith(':')) return { kind: 'other', rewritten: null };
    const json = eventData(text);
    if (json.trim() === '[DONE]') {
      this.#done = true;
      return { kind: 'done', rewritten: `${text}\n\n` };
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(json);
    } catch {
      return { kind: 'other', rewritten: `${text}\n\n` };
    }
    if (!isObject(parsed)) return { kind: 'other', rewritten: `${text}\n\n` };
    if (parsed.error !== undefined || parsed.object === 'error') return { kind: 'error', rewritten: null };
    const keep = this.#see(parsed);
    if (this.#attempt === 0) return { kind: 'data', rewritten: null };
    return { kind: 'data', rewritten: keep ? `data: ${JSON.stringify(this.#rewrite(parsed))}\n\n` : null };
  }

  /** Records what the event carries; false for a continuation's empty role chunk (dropped). */
  #see(event: Body): boolean {
    if (this.#identity === null && event.id !== undefined) {
      this.#identity = { id: event.id, created: event.created, model: event.model };
    }
    let keep = false;
    const choices = Array.isArray(event.choices) ? event.choices : [];
    for (const c of choices) {
      if (!isObject(c)) continue;
      if (typeof c.index === 'number' && c.index !== 0) this.#choices = true;
      const delta = this.#api === 'chat' ? (isObject(c.delta) ? c.delta : {}) : c;
      const content = this.#api === 'chat' ? delta.content : delta.text;
      if (typeof content === 'string' && content !== '') {
        this.#text += content;
        this.#events++;
        keep = true;
      }
      const reasoning = reasoningOf(delta);
      if (reasoning !== null) {
        this.#reasoning += reasoning.text;
        this.#reasoningField ??= reasoning.field;
        // One event however many of the names carry it (newer vLLM may send two).
        if (typeof content !== 'string' || content === '') this.#events++;
        keep = true;
      }
      if (Array.isArray(delta.tool_calls) && delta.tool_calls.length > 0) {
        this.#toolCalls = true;
        keep = true;
      }
      if (c.logprobs != null) this.#logprobs = true;
      if (c.finish_reason != null) {
        this.#finished = true;
        keep = true;
      }
      if (this.#attempt > 0 && delta.role != null) delete delta.role;
    }
    const usage = event.usage;
    if (isObject(usage)) {
      keep = true;
      if (typeof usage.completion_tokens === 'number') this.#usage = usage.completion_tokens;
      if (this.#attempt === 0 && typeof usage.prompt_tokens === 'number') this.#promptTokens = usage.prompt_tokens;
    }
    return keep || choices.length === 0;
  }

  /** A continuation's event as part of the original stream. */
  #rewrite(event: Body): Body {
    if (this.#identity !== null) {
      event.id = this.#identity.id;
      event.created = this.#identity.created;
      event.model = this.#identity.model;
    }
    const usage = event.usage;
    if (isObject(usage) && typeof usage.completion_tokens === 'number') {
      const completion = this.#before + usage.completion_tokens;
      // The continuation's prompt holds the original one plus what was generated before it.
      const promptSeen = typeof usage.prompt_tokens === 'number' ? usage.prompt_tokens - this.#before : 0;
      const prompt = this.#promptTokens ?? Math.max(0, promptSeen);
      event.usage = {
        ...usage,
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: prompt + completion,
      };
    }
    return event;
  }
}

const EMPTY = Buffer.alloc(0);
const PASSED = { kind: 'data', rewritten: null } as const;
