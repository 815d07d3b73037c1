/**
 * The one reader of a generation's SSE stream, and its journal across attempts
 * (docs/stream-resume.md). Each upstream chunk is framed into events once and each event read once
 * (a fast path for a plain text delta, else JSON.parse): the generated text and reasoning that reached
 * the client, its content events (the token clock times them), finish, usage, `[DONE]`, an error
 * event, what forbids a continuation, and the thinking figures (the first answer event; reasoning
 * tokens: the engine's usage figure, else the reasoning events). With `reframe` (a stream that may be resumed) only whole
 * events go to the client, so a cut never leaves half an event behind, and a continuation's events
 * are rewritten into the original stream: its `id`, `created` and `model`, no second `role`, a
 * `usage` that sums the attempts. Without it the bytes pass as they came and are only read. Pure:
 * the relay and stream-resume.ts do the I/O.
 */
import { isObject } from '../config/json-object.js';
import { eventData } from '../http/event-stream.js';
import type { ReasoningField } from '../http/reasoning-fields.js';
import type { Body, ResumeRefusal } from './continuation.js';
import { asOriginalStream, lengthEndingEvents, type StreamIdentity } from './continuation-events.js';
import { GeneratedText } from './generated-text.js';
import type { StreamShape } from './sse-event.js';
import { PlainEvents, type PlainText } from './sse-event.js';

const SEPARATOR = Buffer.from('\n\n');

/** What the journal saw in one event. */
type EventKind = 'data' | 'done' | 'error' | 'other';

/**
 * One client stream across its attempts. `feed` takes an upstream chunk and returns the bytes for
 * the client: whole events only (a partial one waits for its end), the first attempt's as they
 * came, a continuation's rewritten. It stops at an upstream error event (`errorEvent`) or `[DONE]`.
 */
export class StreamJournal {
  readonly #shape: StreamShape;
  readonly #reframe: boolean;
  readonly #plain: PlainText = { field: -1, text: '', at: -1 };
  readonly #plainEvents: PlainEvents;
  #pending: Buffer | null = null;
  /** Content events read in the last `feed`: what the client got with its bytes. */
  #fed = 0;
  #attempt = 0;
  #identity: StreamIdentity | null = null;
  readonly #generated: GeneratedText;
  /** Tokens of the attempts before the current one. */
  #before = 0;
  /** The current attempt's own usage figure, when it sent one. */
  #usage: number | null = null;
  /** Reasoning tokens of the attempts before the current one, and the current one's usage figure. */
  #reasoningBefore = 0;
  #reasoningUsage: number | null = null;
  #promptTokens: number | null = null;
  #join: string | null = null;
  #errorEvent: Buffer | null = null;
  #done = false;
  #finished = false;
  /** What was streamed that forbids a continuation (`refusal`). */
  #toolCalls = false;
  #logprobs = false;
  #choices = false;

  /** `reframe`: only whole events go out (a stream that may be resumed); else bytes pass as they came. */
  constructor(shape: StreamShape, reframe = true) {
    this.#shape = shape;
    this.#reframe = reframe;
    this.#generated = new GeneratedText(shape);
    this.#plainEvents = new PlainEvents(shape);
  }

  /** Content events (generated text or reasoning) in the bytes the last `feed` returned. */
  get fedEvents(): number {
    return this.#fed;
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
    return this.#generated.text;
  }

  /** The reasoning that reached the client (chat streams of a reasoning parser). */
  get reasoning(): string {
    return this.#generated.reasoning;
  }

  /** The delta field the reasoning came under; null before any. */
  get reasoningField(): ReasoningField | null {
    return this.#generated.reasoningField;
  }

  /** Output tokens that reached the client: each attempt's own `usage` where sent, else one per content event. */
  get tokens(): number {
    return this.#before + (this.#usage ?? this.#generated.events);
  }

  /** An event carrying the answer (not its reasoning) has reached the client. */
  get answered(): boolean {
    return this.#generated.answered;
  }

  /**
   * Reasoning tokens that reached the client, read once at the end: per attempt, the engine's own
   * figure when its `usage` has a non-zero one (SGLang's `reasoning_tokens`, vLLM's
   * `completion_tokens_details.reasoning_tokens`; SGLang before PR 15562 always sent 0), else its
   * events that carried reasoning; summed over the attempts. 0 for a stream without reasoning.
   */
  get reasoningTokens(): number {
    const usage = this.#reasoningUsage;
    return this.#reasoningBefore + (usage !== null && usage > 0 ? usage : this.#generated.reasoningEvents);
  }

  /** Why what was streamed forbids a continuation; null if nothing does. */
  get refusal(): ResumeRefusal | null {
    if (this.#choices) return 'n';
    if (this.#toolCalls) return 'tool_calls';
    if (this.#generated.reasoning !== '') return 'reasoning';
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
    this.#reasoningBefore = this.reasoningTokens;
    this.#generated.restart();
    this.#usage = null;
    this.#reasoningUsage = null;
    this.#attempt++;
    this.#pending = null;
    this.#errorEvent = null;
    this.#join = join;
  }

  feed(chunk: Buffer): Buffer {
    const out = this.#feedChunk(chunk);
    this.#fed = this.#generated.takeFed();
    return out;
  }

  #feedChunk(chunk: Buffer): Buffer {
    if (!this.#reframe) {
      if (!this.#done) this.#feedEvents(chunk);
      return chunk;
    }
    if (this.#errorEvent !== null || this.#done) return EMPTY;
    return this.#feedEvents(chunk);
  }

  /** Reads the whole events `chunk` completes; returns the client's bytes for them (reframe). */
  #feedEvents(chunk: Buffer): Buffer {
    const data = this.#pending === null ? chunk : Buffer.concat([this.#pending, chunk]);
    this.#pending = null;
    // One decode per chunk, up to its last whole event; the rest waits for the next chunk. A chunk
    // mostly ends on an event's end: then no search.
    const last = endsWithSeparator(data) ? data.length - SEPARATOR.length : data.lastIndexOf(SEPARATOR);
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
    if (this.#attempt > 0) return this.#joined(out);
    return whole === data.length ? data : data.subarray(0, whole);
  }

  /** The events that end a stream whose output budget ran out exactly at the cut. */
  lengthEnding(includeUsage: boolean): string {
    const counts = { tokens: this.tokens, promptTokens: this.#promptTokens };
    return lengthEndingEvents(this.#shape.api, this.#identity, counts, includeUsage);
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
    const plain = this.#plain;
    // A resumable stream's first event is read whole: its `id`, `created` and `model` are kept.
    const identified = this.#identity !== null || this.#shape.api === null;
    if (this.#attempt === 0 && identified && this.#plainEvents.read(text, plain)) {
      if (plain.text !== '') this.#generated.add(this.#shape.fields[plain.field], plain.text);
      return PASSED;
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
    if (this.#attempt === 0 || !keep) return { kind: 'data', rewritten: null };
    const before = { tokens: this.#before, promptTokens: this.#promptTokens };
    return { kind: 'data', rewritten: `data: ${JSON.stringify(asOriginalStream(parsed, this.#identity, before))}\n\n` };
  }

  /** Records what the event carries; false for a continuation's empty role chunk (dropped). */
  #see(event: Body): boolean {
    if (this.#identity === null && event.id !== undefined) {
      this.#identity = { id: event.id, created: event.created, model: event.model };
    }
    let keep = false;
    const choices = Array.isArray(event.choices) ? event.choices : [];
    if (this.#shape.place === 'event') keep = this.#generated.read(event) || keep;
    for (const c of choices) {
      if (!isObject(c)) continue;
      if (typeof c.index === 'number' && c.index !== 0) this.#choices = true;
      const delta = this.#shape.place === 'delta' ? (isObject(c.delta) ? c.delta : {}) : c;
      keep = this.#generated.read(delta) || keep;
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
      this.#reasoningUsage = reasoningTokensOf(usage) ?? this.#reasoningUsage;
      if (this.#attempt === 0 && typeof usage.prompt_tokens === 'number') this.#promptTokens = usage.prompt_tokens;
    }
    return keep || choices.length === 0;
  }
}

/** An answer's `usage`'s reasoning tokens: vLLM's `completion_tokens_details`, else SGLang's top-level figure. */
function reasoningTokensOf(usage: Body): number | null {
  const details = usage.completion_tokens_details;
  if (isObject(details) && typeof details.reasoning_tokens === 'number') return details.reasoning_tokens;
  return typeof usage.reasoning_tokens === 'number' ? usage.reasoning_tokens : null;
}

function endsWithSeparator(data: Buffer): boolean {
  const n = data.length;
  return n >= 2 && data[n - 1] === 0x0a && data[n - 2] === 0x0a;
}

const EMPTY = Buffer.alloc(0);
const PASSED = { kind: 'data', rewritten: null } as const;
