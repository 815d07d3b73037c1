/**
 * Reading one server-sent event of an OpenAI-style stream (its text without the blank line that
 * ends it), pure: its JSON payload, and the fast path for the commonest event, a single text delta,
 * which the stream journal reads for every token of every stream without JSON.parse (what it costs
 * per chunk: docs/benchmarks.md, "Stream resume and the single body parse against the floor").
 */
const DATA = 'data:';
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
/**
 * What the fast path leaves to the full parse: an error, tool calls, logprobs, a finish, usage, or a
 * multi-line event, in one regex pass rather than one `includes` each.
 */
const UNUSUAL = /"(?:error"|tool_calls":\[|logprobs":[{[]|finish_reason":"|usage":\{)|\n/;

/** The event's `data:` lines joined: its payload (`[DONE]`, or JSON). */
export function eventData(event: string): string {
  let data = '';
  for (const line of event.split('\n')) {
    if (line.startsWith(DATA)) data += line.slice(line[DATA.length] === ' ' ? DATA.length + 1 : DATA.length);
  }
  return data;
}

/** What the fast path read of a plain event: which of the shape's fields held its text (-1: none), and the text. */
export interface PlainText {
  field: number;
  text: string;
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
  if (field < 0) return true;
  const start = at + quoted[field].length;
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
