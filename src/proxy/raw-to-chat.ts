/**
 * A token-exact continuation's raw answer (token-continuation.ts), turned into the chat events the
 * client's stream was made of: the text split at the think markers into the client's reasoning
 * field and `content`, one `finish_reason`, `usage` when the client asked for it, `[DONE]`. The
 * stream journal then rewrites these events into the original stream (its `id`, summed `usage`) as
 * it does a text continuation's. An error event or a cut passes on as such: the journal and the
 * relay handle it like any attempt's.
 */
import { type Readable, Transform, type TransformCallback } from 'node:stream';
import { eventData } from '../http/event-stream.js';
import type { ReasoningField } from '../http/reasoning-fields.js';
import type { ThinkMarkers } from '../model/chat-model.js';
import { type SplitText, ThinkSplitter } from './think-split.js';
import { RawEventReader, type TokenPlan } from './token-continuation.js';

export interface RawToChatOptions {
  reader: RawEventReader;
  markers: ThinkMarkers | null;
  inThink: boolean;
  /** The field the client's stream carried its reasoning in. */
  reasoningField: ReasoningField;
  /** Tokens of the continuation's prompt: the original prompt and what was generated (the journal takes the latter off). */
  promptTokens: number;
  includeUsage: boolean;
}

export class RawToChat extends Transform {
  readonly #opts: RawToChatOptions;
  readonly #splitter: ThinkSplitter | null;
  #pending = '';
  #ended = false;
  #finish: string | null = null;
  #completionTokens: number | null = null;

  constructor(opts: RawToChatOptions) {
    super();
    this.#opts = opts;
    this.#splitter = opts.markers === null ? null : new ThinkSplitter(opts.markers, opts.inThink);
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.#pending += chunk.toString('utf8');
    let at = this.#pending.indexOf('\n\n');
    let out = '';
    while (at >= 0 && !this.#ended) {
      out += this.#event(this.#pending.slice(0, at));
      this.#pending = this.#pending.slice(at + 2);
      at = this.#pending.indexOf('\n\n');
    }
    done(null, out === '' ? undefined : out);
  }

  /** One raw event's chat events ('' for none). */
  #event(text: string): string {
    const data = eventData(text).trim();
    if (data === '') return '';
    if (data === '[DONE]') return this.#ending();
    let parsed: unknown;
    try {
      parsed = JSON.parse(data);
    } catch {
      return '';
    }
    const body = parsed as Record<string, unknown>;
    if (body?.error !== undefined || body?.object === 'error') {
      this.#ended = true;
      return `${text}\n\n`;
    }
    const raw = this.#opts.reader.read(parsed);
    if (raw === null) return '';
    if (raw.completionTokens !== null) this.#completionTokens = raw.completionTokens;
    const splitter = this.#splitter;
    let out = this.#deltas(splitter === null ? { reasoning: '', content: raw.text } : splitter.push(raw.text));
    // The finish goes out as it comes; vLLM's usage follows in an event of its own, before `[DONE]`.
    if (raw.finish !== null && this.#finish === null) {
      this.#finish = raw.finish;
      if (splitter !== null) out += this.#deltas(splitter.flush());
      out += chunkEvent({}, raw.finish);
    }
    return out;
  }

  #deltas(split: SplitText): string {
    let out = '';
    if (split.reasoning !== '') out += chunkEvent({ [this.#opts.reasoningField]: split.reasoning }, null);
    if (split.content !== '') out += chunkEvent({ content: split.content }, null);
    return out;
  }

  /** The raw answer's `[DONE]`: the usage the client asked for, then its own `[DONE]`. */
  #ending(): string {
    this.#ended = true;
    if (this.#finish === null) return '';
    let out = '';
    if (this.#opts.includeUsage && this.#completionTokens !== null) {
      const completion = this.#completionTokens;
      const usage = {
        prompt_tokens: this.#opts.promptTokens,
        completion_tokens: completion,
        total_tokens: this.#opts.promptTokens + completion,
      };
      out += `data: ${JSON.stringify({ object: 'chat.completion.chunk', choices: [], usage })}\n\n`;
    }
    return `${out}data: [DONE]\n\n`;
  }
}

function chunkEvent(delta: Record<string, string>, finish: string | null): string {
  const choice = { index: 0, delta, logprobs: null, finish_reason: finish };
  return `data: ${JSON.stringify({ object: 'chat.completion.chunk', choices: [choice] })}\n\n`;
}

/** The raw answer of the token-exact continuation `plan`, as the client's chat events. */
export function chatFromRaw(raw: Readable, plan: TokenPlan, field: ReasoningField, includeUsage: boolean): Readable {
  const chat = new RawToChat({
    reader: new RawEventReader(plan.kind),
    markers: plan.markers,
    inThink: plan.inThink,
    reasoningField: field,
    promptTokens: plan.promptTokens + plan.generatedTokens,
    includeUsage,
  });
  // A cut of the raw answer is a cut of the chat stream: the relay resumes or ends it.
  raw.on('error', (error) => chat.destroy(error));
  return raw.pipe(chat);
}
