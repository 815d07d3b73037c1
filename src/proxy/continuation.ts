/**
 * The pure part of stream resume (docs/stream-resume.md): whether a request may ever be continued,
 * the continuation's body, and the journal of one client stream across its attempts. The journal
 * reads the SSE events as they pass (whole events only go to the client, so a cut never leaves half
 * an event behind), keeps the text and token count that reached the client, and rewrites a
 * continuation's events into the original stream: its `id`, `created` and `model`, no second
 * `role`, a `usage` that sums the attempts. No I/O here: stream-resume.ts owns that.
 */

export type ResumeApi = 'chat' | 'completion';

/** Every `reason` of `fleetgate_stream_resume_failures_total`, so each series exists from the start. */
export const RESUME_REFUSALS = [
  'n',
  'constrained',
  'echo',
  'suffix',
  'logprobs',
  'tool_calls',
  'reasoning',
  'unbuildable',
  'limit',
  'no_backend',
  'rejected',
] as const satisfies readonly ResumeRefusal[];

/** Why a cut stream was not continued: the `reason` of `fleetgate_stream_resume_failures_total`. */
export type ResumeRefusal =
  /** `n` or `best_of` > 1: several choices, one continuation body cannot carry them. */
  | 'n'
  /** A grammar (`response_format`, `json_schema`, `regex`, `ebnf`, `guided_*`) would start again from its beginning. */
  | 'constrained'
  /** Completions `echo`: the continuation's echo would be the extended prompt. */
  | 'echo'
  /** Completions `suffix`: fill-in-the-middle is not a continuation of text. */
  | 'suffix'
  /** Asked or streamed logprobs: the continued prefix's would be missing or re-scored. */
  | 'logprobs'
  /** `tool_calls` already streamed: a half-sent call cannot be continued as message text. */
  | 'tool_calls'
  /** `reasoning_content` streamed: its think tags are the model's, unknown to fleetgate. */
  | 'reasoning'
  /** The body is not one the continuation can be built from (not JSON, token ids, several prompts). */
  | 'unbuildable'
  /** `retry.resume_limit` continuations were already made. */
  | 'limit'
  /** No ready backend of the model and class within `retry.resume_wait`. */
  | 'no_backend'
  /** The continuation was answered with something other than a 200 event stream. */
  | 'rejected';

type Body = Record<string, unknown>;

export function apiOf(path: string): ResumeApi | null {
  const q = path.indexOf('?');
  const bare = q < 0 ? path : path.slice(0, q);
  if (bare === '/v1/chat/completions') return 'chat';
  if (bare === '/v1/completions') return 'completion';
  return null;
}

const CONSTRAINED = ['json_schema', 'regex', 'ebnf', 'structural_tag'];

function isObject(value: unknown): value is Body {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Why this request can never be continued, whatever it streamed; null if it can. */
export function bodyRefusal(api: ResumeApi, body: unknown): ResumeRefusal | null {
  if (!isObject(body)) return 'unbuildable';
  if ((typeof body.n === 'number' && body.n > 1) || (typeof body.best_of === 'number' && body.best_of > 1)) return 'n';
  const format = body.response_format;
  if (isObject(format) && format.type !== undefined && format.type !== 'text') return 'constrained';
  for (const key of Object.keys(body)) {
    if (body[key] == null) continue;
    if (CONSTRAINED.includes(key) || key.startsWith('guided_')) return 'constrained';
  }
  if (body.echo === true) return 'echo';
  if (typeof body.suffix === 'string' && body.suffix !== '') return 'suffix';
  if (body.logprobs === true || typeof body.logprobs === 'number') return 'logprobs';
  if (typeof body.top_logprobs === 'number' && body.top_logprobs > 0) return 'logprobs';
  if (api === 'chat') return Array.isArray(body.messages) && body.messages.length > 0 ? null : 'unbuildable';
  const prompt = body.prompt;
  if (typeof prompt === 'string') return null;
  return Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === 'string' ? null : 'unbuildable';
}

const BUDGET_KEYS = ['max_tokens', 'max_completion_tokens'] as const;

/** Output tokens the original request still allows after `generated`; null when it set no limit. */
export function remainingBudget(body: Body, generated: number): number | null {
  let least: number | null = null;
  for (const key of BUDGET_KEYS) {
    const value = body[key];
    if (typeof value === 'number') least = Math.min(least ?? value, value - generated);
  }
  return least;
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((part) => (isObject(part) && typeof part.text === 'string' ? part.text : '')).join('');
  }
  return '';
}

/**
 * The body that continues `original` after `text` (`generated` tokens) reached the client: chat gets
 * the text as a final assistant message to continue; completions get it appended to the prompt.
 * Every other field (sampling parameters, `stop`, `seed`, `priority`, `stream_options`) is kept; the
 * output budgets shrink by what was generated. Nothing generated yet: the original body as it was.
 */
export function continuationBody(api: ResumeApi, original: Body, text: string, generated: number): Body {
  if (text === '' && generated === 0) return original;
  const body: Body = { ...original };
  for (const key of [...BUDGET_KEYS, 'min_tokens'] as const) {
    const value = original[key];
    if (typeof value === 'number') body[key] = Math.max(key === 'min_tokens' ? 0 : 1, value - generated);
  }
  if (api === 'completion') {
    const prompt = original.prompt;
    body.prompt = typeof prompt === 'string' ? prompt + text : [(prompt as string[])[0] + text];
    return body;
  }
  const messages = [...(original.messages as unknown[])];
  const last = messages[messages.length - 1];
  if (original.continue_final_message === true && isObject(last) && last.role === 'assistant') {
    // The client itself prefilled the answer: the text continues that message.
    messages[messages.length - 1] = { ...last, content: textOf(last.content) + text };
  } else {
    messages.push({ role: 'assistant', content: text });
  }
  body.messages = messages;
  body.continue_final_message = true;
  body.add_generation_prompt = false;
  return body;
}

const SEPARATOR = Buffer.from('\n\n');
const DATA = 'data:';

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
  /** The raw upstream error event, once one arrived. */
  errorEvent: Buffer | null = null;
  /** `[DONE]` arrived. */
  done = false;
  /** A `finish_reason` arrived: the generation is whole even if `[DONE]` is lost. */
  finished = false;
  toolCalls = false;
  reasoning = false;
  logprobs = false;
  choices = false;

  constructor(api: ResumeApi) {
    this.#api = api;
  }

  /** The text that reached the client (content deltas, or completion text). */
  get text(): string {
    return this.#text;
  }

  /** Output tokens that reached the client: each attempt's own `usage` where sent, else one per content event. */
  get tokens(): number {
    return this.#before + (this.#usage ?? this.#events);
  }

  /** Why what was streamed forbids a continuation; null if nothing does. */
  get refusal(): ResumeRefusal | null {
    if (this.choices) return 'n';
    if (this.toolCalls) return 'tool_calls';
    if (this.reasoning) return 'reasoning';
    if (this.logprobs) return 'logprobs';
    return null;
  }

  /** A continuation's events follow; `join` (an SSE comment) goes out before its first. */
  beginAttempt(join: string): void {
    this.#before = this.tokens;
    this.#events = 0;
    this.#usage = null;
    this.#attempt++;
    this.#pending = null;
    this.errorEvent = null;
    this.#join = join;
  }

  feed(chunk: Buffer): Buffer {
    if (this.errorEvent !== null || this.done) return EMPTY;
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
        this.errorEvent = Buffer.from(text.slice(from, at + 2));
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
    if (this.#attempt === 0 && this.#identity !== null && this.#plainDelta(text)) return PASSED;
    if (text.startsWith(':')) return { kind: 'other', rewritten: null };
    let json = '';
    for (const line of text.split('\n')) {
      if (line.startsWith(DATA)) json += line.slice(line[DATA.length] === ' ' ? DATA.length + 1 : DATA.length);
    }
    if (json.trim() === '[DONE]') {
      this.done = true;
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

  /**
   * The first attempt's common event, read without JSON.parse (it is every token of every stream;
   * what the journal costs per chunk: docs/benchmarks.md, "Stream resume and the single body parse
   * against the floor"): one choice (index 0) whose delta holds only text, nothing of what a
   * continuation must know about (finish, usage, tool calls, reasoning, logprobs, an error). Inside
   * a JSON string a quote is escaped, so none of these byte patterns can come from generated text.
   * False: not such an event, left to the full parse.
   */
  #plainDelta(event: string): boolean {
    if (!event.startsWith('data: {')) return false;
    if (UNUSUAL.test(event)) return false;
    const index = event.indexOf('"index":');
    if (index >= 0 && (event[index + 8] !== '0' || event.indexOf('"index":', index + 1) >= 0)) return false;
    const key = this.#api === 'chat' ? '"content":"' : '"text":"';
    const at = event.indexOf(key);
    if (at < 0) return true;
    if (event.indexOf(key, at + 1) >= 0) return false;
    const start = at + key.length;
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
    if (end === start) return true;
    this.#text += escaped ? (JSON.parse(event.slice(start - 1, end + 1)) as string) : event.slice(start, end);
    this.#events++;
    return true;
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
      if (typeof c.index === 'number' && c.index !== 0) this.choices = true;
      const delta = this.#api === 'chat' ? (isObject(c.delta) ? c.delta : {}) : c;
      const content = this.#api === 'chat' ? delta.content : delta.text;
      if (typeof content === 'string' && content !== '') {
        this.#text += content;
        this.#events++;
        keep = true;
      }
      if (typeof delta.reasoning_content === 'string' && delta.reasoning_content !== '') {
        this.reasoning = true;
        this.#events++;
        keep = true;
      }
      if (Array.isArray(delta.tool_calls) && delta.tool_calls.length > 0) {
        this.toolCalls = true;
        keep = true;
      }
      if (c.logprobs != null) this.logprobs = true;
      if (c.finish_reason != null) {
        this.finished = true;
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
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
/**
 * What the fast path leaves to the full parse: an error, tool calls, reasoning, logprobs, a finish,
 * usage, or a multi-line event, in one regex pass rather than one `includes` each.
 */
const UNUSUAL = /"(?:error"|tool_calls":\[|reasoning_content":"|logprobs":[{[]|finish_reason":"|usage":\{)|\n/;
