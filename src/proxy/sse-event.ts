/**
 * Reading one server-sent event of an OpenAI-style stream (its text without the blank line that
 * ends it), pure: its JSON payload, and the fast path for the commonest event, a single text delta,
 * which the stream journal reads for every token of every stream without JSON.parse (what it costs
 * per chunk: docs/benchmarks.md, "Stream resume and the single body parse against the floor").
 */
import { REASONING_FIELDS } from './reasoning-fields.js';

const DATA = 'data:';
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
/**
 * What the fast path leaves to the full parse: an error, tool calls, reasoning, logprobs, a finish,
 * usage, or a multi-line event, in one regex pass rather than one `includes` each.
 */
const QUOTED_KEY = { content: '"content":"', text: '"text":"' } as const;
const UNUSUAL = new RegExp(
  `"(?:error"|tool_calls":\\[|${REASONING_FIELDS.map((field) => `${field}":"`).join('|')}|logprobs":[{[]|finish_reason":"|usage":\\{)|\\n`,
);

/** The event's `data:` lines joined: its payload (`[DONE]`, or JSON). */
export function eventData(event: string): string {
  let data = '';
  for (const line of event.split('\n')) {
    if (line.startsWith(DATA)) data += line.slice(line[DATA.length] === ' ' ? DATA.length + 1 : DATA.length);
  }
  return data;
}

/**
 * The text of an event that is one choice (index 0) whose delta holds only text under `key`
 * (`content` for chat, `text` for completions), nothing a continuation must know about (finish,
 * usage, tool calls, reasoning, logprobs, an error): `''` when it carries none. Null: not such an
 * event, left to the full parse. Inside a JSON string a quote is escaped, so none of the byte
 * patterns looked for can come from generated text.
 */
export function plainDeltaText(event: string, key: 'content' | 'text'): string | null {
  if (!event.startsWith('data: {')) return null;
  if (UNUSUAL.test(event)) return null;
  const index = event.indexOf('"index":');
  if (index >= 0 && (event[index + 8] !== '0' || event.indexOf('"index":', index + 1) >= 0)) return null;
  const quoted = QUOTED_KEY[key];
  const at = event.indexOf(quoted);
  if (at < 0) return '';
  if (event.indexOf(quoted, at + 1) >= 0) return null;
  const start = at + quoted.length;
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
  if (end >= event.length) return null;
  return escaped ? (JSON.parse(event.slice(start - 1, end + 1)) as string) : event.slice(start, end);
}
