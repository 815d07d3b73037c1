/**
 * A request's block keys for `kv-aware` (fleet/kv-events/block-keys.ts, over the token ids the
 * engine will see): the model's chat template and tokenizer, as the engines apply them. Both cost
 * CPU (rendering a 6 KB chat with @huggingface/jinja ~0.45 ms, tokenizing it ~3 ms), so a chat is
 * read per message: at start-up each model's template is probed with marker messages for how
 * it wraps each message (`<|im_start|>user\n` ... `<|im_end|>\n` for ChatML) and checked to be a
 * plain concatenation whose message boundaries are special tokens (so tokenizing message by message
 * gives exactly the whole prompt's ids); then a request's ids are its messages' ids, each from a
 * bounded cache (`token_cache` messages, least recently used out: a conversation's system prompt
 * and earlier turns repeat in every request). A chat the probe does not cover (tools, tool calls,
 * non-text content, template kwargs, a think block in a message, a last message not the user's) or
 * a template that is no plain concatenation is rendered and tokenized whole; a raw prompt is
 * tokenized whole, token-id prompts are taken as they are. Tokenizing runs on a worker thread
 * (model/background-tokenizer.ts): the keys of a request with new text are a promise.
 */
import type { ModelConfig } from '../config/types.js';
import { blockKeys } from '../fleet/kv-events/block-keys.js';
import { BackgroundTokenizer } from '../model/background-tokenizer.js';
import { type ChatModel, loadChatModel } from '../model/chat-model.js';

type Body = Record<string, unknown>;

/** Block keys beyond this many are not computed: a longer prompt is told apart by its start already. */
const MAX_BLOCKS = 1024;

interface Frame {
  /** Text before a message's content, by role. */
  readonly open: ReadonlyMap<string, string>;
  /** Text after every message's content. */
  readonly close: string;
  /** Token ids of the assistant opening a request for a new answer ends with. */
  readonly generation: readonly number[];
}

const MARK = ['\u0001a\u0001', '\u0001b\u0001', '\u0001c\u0001', '\u0001d\u0001', '\u0001e\u0001'];
const ROLES = ['system', 'user', 'assistant', 'user', 'assistant'];

/** How the template wraps messages, or null when it is not a plain concatenation the cache can use. */
function probe(model: ChatModel): Frame | null {
  try {
    const messages = ROLES.map((role, i) => ({ role, content: MARK[i] }));
    messages.push({ role: 'user', content: '\u0001f\u0001' });
    const text = model.render(messages, { addGenerationPrompt: true });
    const pieces: string[] = [];
    let at = 0;
    for (const mark of [...MARK, '\u0001f\u0001']) {
      const next = text.indexOf(mark, at);
      if (next < 0) return null;
      pieces.push(text.slice(at, next));
      at = next + mark.length;
    }
    const tail = text.slice(at);
    // pieces[i] = close (of message i - 1) + open(role i); the close is what ends a lone message.
    const lone = model.render([{ role: 'system', content: MARK[0] }], { addGenerationPrompt: false });
    const close = lone.slice(lone.indexOf(MARK[0]) + MARK[0].length);
    if (close === '' || ![...pieces.slice(1), tail].every((piece) => piece.startsWith(close))) return null;
    const open = new Map<string, string>([['system', pieces[0]]]);
    for (let i = 1; i < pieces.length; i++) {
      const role = i < ROLES.length ? ROLES[i] : 'user';
      const own = pieces[i].slice(close.length);
      if (open.has(role) && open.get(role) !== own) return null;
      open.set(role, own);
    }
    const frame: Frame = { open, close, generation: model.encode(tail.slice(close.length)) };
    // The cache's premise, checked on a conversation without a system message: the whole prompt's
    // ids are the messages' ids one after the other.
    const check = [
      { role: 'user', content: 'Hello there, how are you?' },
      { role: 'assistant', content: 'Fine, thanks.\n\nAnd you?' },
      { role: 'user', content: '  Two spaces, then text.' },
    ];
    const whole = model.encode(model.render(check, { addGenerationPrompt: true }));
    const parts = [...check.flatMap((m) => model.encode(messageText(frame, m.role, m.content))), ...frame.generation];
    return whole.length === parts.length && whole.every((id, i) => id === parts[i]) ? frame : null;
  } catch {
    return null;
  }
}

function messageText(frame: Frame, role: string, content: string): string {
  return `${frame.open.get(role) ?? ''}${content}${frame.close}`;
}

/** A chat the probe's frame covers: text messages of known roles, no tools or kwargs, the user's last. */
function plainChat(frame: Frame, body: Body): Array<{ role: string; content: string }> | null {
  if (body.tools !== undefined || body.chat_template_kwargs !== undefined) return null;
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) return null;
  for (const m of messages as Body[]) {
    if (typeof m?.content !== 'string' || typeof m.role !== 'string' || !frame.open.has(m.role)) return null;
    if (m.tool_calls !== undefined || m.reasoning_content !== undefined || m.content.includes('<think>')) return null;
  }
  if ((messages[messages.length - 1] as Body).role !== 'user') return null;
  return messages as Array<{ role: string; content: string }>;
}

/**
 * A message's token ids (its frame included) by content and role, least recently used out beyond
 * `size`. Keyed by the content as parsed, not the framed text: hashing a string the request already
 * holds costs less than building and hashing a new one.
 */
class TokenCache {
  readonly #size: number;
  readonly #entries = new Map<string, { readonly role: string; readonly ids: Ids }>();

  constructor(size: number) {
    this.#size = size;
  }

  get(role: string, content: string): Ids | undefined {
    const hit = this.#entries.get(content);
    if (hit === undefined || hit.role !== role) return undefined;
    this.#entries.delete(content);
    this.#entries.set(content, hit);
    return hit.ids;
  }

  set(role: string, content: string, ids: Ids): void {
    if (this.#size === 0) return;
    this.#entries.delete(content);
    this.#entries.set(content, { role, ids });
    if (this.#entries.size > this.#size) this.#entries.delete(this.#entries.keys().next().value as string);
  }
}

export interface KvKeysOptions {
  readonly model: ModelConfig;
  /** Tokens per block the engines key at; null while none is known (no keys then). */
  readonly blockSize: () => number | null;
  /** Messages whose ids are kept (`routing.kv_events.token_cache`). */
  readonly cacheSize: number;
}

/**
 * The request's block keys: at once when every text is in the cache, else once the worker has
 * tokenized what is new; undefined when there are none (no model for it, no prompt, block size unknown).
 */
type KvKeys = readonly number[] | Promise<readonly number[] | undefined> | undefined;

export interface KvKeysReader {
  (path: string, json: unknown): KvKeys;
  /** Stops the tokenizer workers. */
  close(): Promise<void>;
}

/** What one model needs: its template, how it frames messages (null: not a plain concatenation), its caches. */
interface ModelReader {
  readonly model: ChatModel;
  readonly frame: Frame | null;
  readonly worker: BackgroundTokenizer;
  readonly cache: TokenCache;
}

/** Null when no model directory is configured: kv-aware then has no keys and falls back. */
export function createKvKeys(opts: KvKeysOptions): KvKeysReader | null {
  // The template is probed here, at start-up, once per model: a few ms of rendering and tokenizing.
  const readerOf = (dir: string): ModelReader => {
    const model = loadChatModel(dir);
    return { model, frame: probe(model), worker: new BackgroundTokenizer(dir), cache: new TokenCache(opts.cacheSize) };
  };
  const named = new Map(Object.entries(opts.model.dirs).map(([name, dir]) => [name, readerOf(dir)]));
  const single = opts.model.dir === null ? null : readerOf(opts.model.dir);
  if (single === null && named.size === 0) return null;
  const read = (path: string, json: unknown): KvKeys => {
    const blockSize = opts.blockSize();
    if (blockSize === null || json === null || typeof json !== 'object' || Array.isArray(json)) return undefined;
    const body = json as Body;
    const reader = (typeof body.model === 'string' ? named.get(body.model) : undefined) ?? single;
    if (reader === null) return undefined;
    const ids = tokenIds(reader, path, body);
    if (ids === null) return undefined;
    const keys = (tokens: Ids) => blockKeys(tokens, blockSize, MAX_BLOCKS);
    return 'then' in ids ? ids.then(keys) : keys(ids);
  };
  const readers = [...named.values(), ...(single === null ? [] : [single])];
  return Object.assign(read, { close: async () => void (await Promise.all(readers.map((r) => r.worker.close()))) });
}

/** Token ids: a prompt's own, the tokenizer's, or a chat's messages' joined. */
type Ids = ArrayLike<number>;
type TokenIds = Ids | Promise<Ids>;

/** The prompt's token ids as the engine will see them; null when the body holds no prompt. */
function tokenIds(reader: ModelReader, path: string, body: Body): TokenIds | null {
  if (path.endsWith('/chat/completions')) {
    if (!Array.isArray(body.messages)) return null;
    const frame = reader.frame;
    const plain = frame === null ? null : plainChat(frame, body);
    if (frame === null || plain === null) {
      const kwargs = body.chat_template_kwargs as Record<string, unknown> | undefined;
      const options = { addGenerationPrompt: true, tools: body.tools, templateKwargs: kwargs };
      return reader.worker.encode(reader.model.render(body.messages, options));
    }
    return chatIds(reader, frame, plain);
  }
  const prompt = path.endsWith('/generate') ? (body.input_ids ?? body.text) : body.prompt;
  if (Array.isArray(prompt) && prompt.every((x) => typeof x === 'number')) return prompt as number[];
  return typeof prompt === 'string' ? reader.worker.encode(prompt) : null;
}

/** A plain chat's ids, message by message from the cache; what it does not hold, from the worker. */
function chatIds(reader: ModelReader, frame: Frame, messages: Array<{ role: string; content: string }>): TokenIds {
  const parts = messages.map((m) => reader.cache.get(m.role, m.content));
  const join = (known: ReadonlyArray<Ids | undefined>): Uint32Array => {
    let length = frame.generation.length;
    for (const part of known) length += part?.length ?? 0;
    const ids = new Uint32Array(length);
    let at = 0;
    for (const part of known) {
      if (part === undefined) continue;
      ids.set(part, at);
      at += part.length;
    }
    ids.set(frame.generation, at);
    return ids;
  };
  if (parts.every((part) => part !== undefined)) return join(parts);
  const filled = messages.map(({ role, content }, i) =>
    parts[i] !== undefined
      ? parts[i]
      : reader.worker.encode(messageText(frame, role, content)).then((ids) => {
          reader.cache.set(role, content, ids);
          return ids;
        }),
  );
  return Promise.all(filled).then(join);
}
