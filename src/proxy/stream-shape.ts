/**
 * Where a generation stream's events carry generated text, by the API its path names: one table
 * the stream reader (stream-journal.ts) reads with, for its fast path and its full read alike. A
 * chat stream's text is the answer's `content` and its reasoning (reasoning-fields.ts); completions
 * carry `text` in each choice; SGLang's `/generate` and Anthropic-style messages carry `text` in the
 * event (or its `delta`); a Responses stream its `*.delta` events' `delta` (its `*.done` events repeat
 * the text and are not counted).
 */
import { generationApiOf } from '../routing/openai-request.js';
import type { ResumeApi } from './continuation.js';
import { REASONING_FIELDS } from './reasoning-fields.js';

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
