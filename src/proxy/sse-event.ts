/**
 * Reading the server-sent events of a generation stream, pure: where its API carries generated
 * text (its `StreamShape`: a chat stream's answer `content` and its reasoning under the names of
 * reasoning-fields.ts; completions' `text` in each choice; SGLang's `/generate` and Anthropic-style
 * messages' `text` in the event or its `delta`; a Responses stream's `*.delta` events' `delta`, its
 * `*.done` events repeating the text uncounted), an event's JSON payload, and the fast path for the
 * commonest event, a single text delta, which the stream's reader (stream-journal.ts) takes for
 * every token of every stream without JSON.parse.
 */

import { REASONING_FIELDS } from '../http/reasoning-fields.js';
import { generationApiOf } from '../routing/openai-request.js';
import type { ResumeApi } from './continuation.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
/**
 * What the fast path leaves to the full parse: an error, tool calls, logprobs, a finish, usage, or a
 * multi-line event, in one regex pass rather than one `includes` each.
 */
const UNUSUAL = /"(?:error"|tool_calls":\[|logprobs":[{[]|finish_reason":"|usage":\{)|\n/;

/**
 * What the fast path read of a plain event: which of the shape's fields held its text (-1: none),
 * the text, and where in the event the text's JSON string starts (after its quote; -1: none).
 */
export interface PlainText {
  field: number;
  text: string;
  at: number;
}

/**
 * Reads an event that is one choice (index 0, or no choices: `/generate`) whose only generated text
 * is one string under one of the shape's `quoted` fields, and nothing a continuation must know about
 * (finish, usage, tool calls, logprobs, an error), into `out`; `field` -1 when it carries no text.
 * False: not such an event (or two text fields at once), left to the full parse. Inside a JSON
 * string a quote is escaped, so none of the byte patterns looked for can come from generated text.
 */
export function readPlainText(event: string, quoted: readonly string[], out: PlainText): boolean {
  if (!event.startsWith('data: {')) return false;
  if (UNUSUAL.test(event)) return false;
  const index = event.indexOf('"index":');
  if (index >= 0 && (event[index + 8] !== '0' || event.indexOf('"index":', index + 1) >= 0)) return false;
  let field = -1;
  let at = -1;
  for (let i = 0; i < quoted.length; i++) {
    const found = event.indexOf(quoted[i]);
    if (found < 0) continue;
    if (field >= 0 || event.indexOf(quoted[i], found + 1) >= 0) return false;
    field = i;
    at = found;
  }
  out.field = field;
  out.text = '';
  out.at = -1;
  if (field < 0) return true;
  const start = at + quoted[field].length;
  out.at = start;
  let end = start;
  let escaped = false;
  for (; end < event.length; end++) {
    const char = event.charCodeAt(end);
    if (char === QUOTE) break;
    if (char === BACKSLASH) {
      // The escaped character is skipped: `\"` and `\\` alike.
      escaped = true;
      end++;
    }
  }
  if (end >= event.length) return false;
  out.text = escaped ? (JSON.parse(event.slice(start - 1, end + 1)) as string) : event.slice(start, end);
  return true;
}

/**
 * `readPlainText` for one stream, its last plain event with text kept as a template: an engine
 * writes every token's event alike but for its text, so an event that is the template's text
 * before and after the text (its `id`, `created`, `model`, and every field but the one string)
 * around a text without a quote or a backslash is the same plain event, read with two
 * comparisons instead of the searches over the whole event (each token of each stream comes here).
 */
export class PlainEvents {
  readonly #quoted: readonly string[];
  #field = -1;
  #before = '';
  #after = '';

  constructor(shape: StreamShape) {
    this.#quoted = shape.quoted;
  }

  /** As `readPlainText`. */
  read(event: string, out: PlainText): boolean {
    const before = this.#before;
    const after = this.#after;
    if (
      this.#field >= 0 &&
      event.length >= before.length + after.length &&
      event.startsWith(before) &&
      event.endsWith(after)
    ) {
      const text = event.slice(before.length, event.length - after.length);
      if (plainString(text)) {
        out.field = this.#field;
        out.text = text;
        out.at = before.length;
        return true;
      }
    }
    if (!readPlainText(event, this.#quoted, out)) return false;
    const { at, text } = out;
    if (
      out.field >= 0 &&
      plainString(text) &&
      event.startsWith(text, at) &&
      event.charCodeAt(at + text.length) === QUOTE
    ) {
      // Copied: a slice would keep the whole chunk's text alive for the stream's life.
      this.#field = out.field;
      this.#before = Buffer.from(event.slice(0, at)).toString();
      this.#after = Buffer.from(event.slice(at + text.length)).toString();
    }
    return true;
  }
}

/** Text that is its own JSON string's content: no quote, backslash or line break to escape. */
function plainString(text: string): boolean {
  return text.indexOf('"') < 0 && text.indexOf('\\') < 0 && text.indexOf('\n') < 0;
}

export interface StreamShape {
  /** The API a continuation of it speaks; null: its streams are never resumed. */
  readonly api: ResumeApi | null;
  /** Fields whose non-empty string value is generated text. */
  readonly fields: readonly string[];
  /** The same, as they appear in an event's JSON: `"content":"`. */
  readonly quoted: readonly string[];
  /** Where the full read finds them: each choice's `delta` (chat), each choice, or the event itself. */
  readonly place: 'delta' | 'choice' | 'event';
}

function shape(api: ResumeApi | null, fields: readonly string[], place: StreamShape['place']): StreamShape {
  return { api, fields, quoted: fields.map((field) => `"${field}":"`), place };
}

export const CHAT_SHAPE = shape('chat', ['content', ...REASONING_FIELDS], 'delta');
export const COMPLETION_SHAPE = shape('completion', ['text'], 'choice');
const EVENT_TEXT_SHAPE = shape(null, ['text'], 'event');
const RESPONSES_SHAPE = shape(null, ['delta'], 'event');

/** The shape of the streams `path` answers with. */
export function streamShapeOf(path: string): StreamShape {
  const api = generationApiOf(path);
  if (api === 'chat') return CHAT_SHAPE;
  if (api === 'completion') return COMPLETION_SHAPE;
  return path.startsWith('/v1/responses') ? RESPONSES_SHAPE : EVENT_TEXT_SHAPE;
}
