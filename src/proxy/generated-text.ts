/**
 * What a generation stream generated, as its client got it: the answer's text, its reasoning (under
 * the first reasoning name seen), and its content events, counted once per event however many of
 * the shape's fields carry text (newer vLLM may send both reasoning names, and the turn from
 * reasoning to answer both kinds). The stream's reader (stream-journal.ts) feeds it each event it
 * reads, from its fast path or its full parse; the token clock and a continuation read it. It also
 * counts the events that carried reasoning and marks the first that carried the answer (the
 * thinking metrics, token-timing.ts): one branch the text already takes, no second read.
 */
import { isObject } from '../config/json-object.js';
import { REASONING_FIELDS, type ReasoningField } from '../http/reasoning-fields.js';
import type { Body } from './continuation.js';
import type { StreamShape } from './sse-event.js';

const REASONING: ReadonlySet<string> = new Set(REASONING_FIELDS);

export class GeneratedText {
  readonly #shape: StreamShape;
  #text = '';
  #reasoning = '';
  #reasoningField: ReasoningField | null = null;
  /** Content events since `restart`, and since `fed` was last read. */
  #events = 0;
  #fed = 0;
  /** Events that carried reasoning since `restart`. */
  #reasoningEvents = 0;
  #answered = false;

  constructor(shape: StreamShape) {
    this.#shape = shape;
  }

  get text(): string {
    return this.#text;
  }

  get reasoning(): string {
    return this.#reasoning;
  }

  get reasoningField(): ReasoningField | null {
    return this.#reasoningField;
  }

  /** Content events since the attempt began. */
  get events(): number {
    return this.#events;
  }

  /** Events that carried reasoning since the attempt began (an event with both kinds counts here too). */
  get reasoningEvents(): number {
    return this.#reasoningEvents;
  }

  /** An event carrying the answer (not reasoning) reached the client, in any attempt. */
  get answered(): boolean {
    return this.#answered;
  }

  /** Content events since the last call, which starts the next count. */
  takeFed(): number {
    const fed = this.#fed;
    this.#fed = 0;
    return fed;
  }

  /** A new attempt: its events are counted afresh (the text goes on). */
  restart(): void {
    this.#events = 0;
    this.#reasoningEvents = 0;
  }

  /**
   * The text of one event (or choice, or delta) under the shape's fields; an Anthropic-style event
   * holds it in its `delta`. True when it had any.
   */
  read(holder: Body): boolean {
    const from = this.#shape.place === 'event' && isObject(holder.delta) ? holder.delta : holder;
    let counted = false;
    let reasoned = false;
    for (const field of this.#shape.fields) {
      const value = from[field];
      if (typeof value !== 'string' || value === '') continue;
      const reasoning = REASONING.has(field);
      // The second reasoning name of an event repeats the first.
      if (reasoning && reasoned) continue;
      reasoned ||= reasoning;
      this.add(field, value, counted);
      counted = true;
    }
    return counted;
  }

  /** Text under `field` reached the client; `again`: its event was already counted. */
  add(field: string, text: string, again = false): void {
    if (REASONING.has(field)) {
      this.#reasoning += text;
      this.#reasoningField ??= field as ReasoningField;
      // `read` skips an event's second reasoning name: one count per event.
      this.#reasoningEvents++;
    } else {
      this.#text += text;
      this.#answered = true;
    }
    if (again) return;
    this.#events++;
    this.#fed++;
  }
}
