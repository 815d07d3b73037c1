/**
 * A request's block keys for `kv-aware` (fleet/kv-events/block-keys.ts, over the token ids the
 * engine will see): the model's chat template and tokenizer, as the engines apply them. Both cost
 * CPU (rendering a 6 KB chat with @huggingface/jinja ~0.45 ms, tokenizing it ~3 ms), so a chat is
 * read per message where the template allows it (model/chat-frame.ts, probed at start-up): a
 * request's ids are its messages' ids, each from a bounded cache (`token_cache` messages, least
 * recently used out: a conversation's system prompt and earlier turns repeat in every request). A
 * chat the frame does not cover (tools, tool calls, non-text content, template kwargs, a think block
 * in a message, a last message not the user's) is rendered as one text; a raw prompt is one text
 * too, token-id prompts are taken as they are. Tokenizing runs on a worker thread
 * (model/background-tokenizer.ts): the keys of a request with new text are a promise.
 *
 * New text is tokenized only as far as a backend could hold it: when no backend holds every block
 * of what is known before it, nothing after could match; a prompt's last text (a batch job's unique
 * user prompt, a chat's newest turn) is first tokenized for about two blocks past what is known, and
 * whole only when some backend holds all of that (a repeated prompt: group sampling, a retry). The
 * blocks left untokenized are keyed 0, a key no block has (chainKey never returns it), so the policy
 * still sees the prompt's length in blocks, estimated at the tokenized part's characters per token.
 */
import type { ModelConfig } from '../config/types.js';
import { blockKeys } from '../fleet/kv-events/block-keys.js';
import { BackgroundTokenizer } from '../model/background-tokenizer.js';
import { type Frame, messageText, plainChat, probe } from '../model/chat-frame.js';
import { type ChatModel, loadChatModel } from '../model/chat-model.js';

type Body = Record<string, unknown>;

/** Block keys beyond this many are not computed: a longer prompt is told apart by its start already. */
const MAX_BLOCKS = 1024;

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
  /** The longest leading run of `keys` some backend holds (kv-events' map). */
  readonly longestHeld: (keys: readonly number[]) => number;
  /** Tokenize every prompt whole (`routing.kv_events.tokenize_whole`). */
  readonly tokenizeWhole?: boolean;
  /** A request's keys left `blocks` untokenized. */
  readonly untokenized?: (blocks: number) => void;
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
  // Tokenizing whole: every run is taken as held on, so each text is tokenized to its end.
  const longestHeld = opts.tokenizeWhole === true ? (keys: readonly number[]) => keys.length : opts.longestHeld;
  const untokenized = opts.untokenized ?? (() => {});
  const read = (path: string, json: unknown): KvKeys => {
    const blockSize = opts.blockSize();
    if (blockSize === null || json === null || typeof json !== 'object' || Array.isArray(json)) return undefined;
    const body = json as Body;
    const reader = (typeof body.model === 'string' ? named.get(body.model) : undefined) ?? single;
    if (reader === null) return undefined;
    return promptKeys({ reader, blockSize, longestHeld, untokenized }, path, body);
  };
  const readers = [...named.values(), ...(single === null ? [] : [single])];
  return Object.assign(read, { close: async () => void (await Promise.all(readers.map((r) => r.worker.close()))) });
}

type Ids = ArrayLike<number>;
type Keys = readonly number[];

/** One request's reading: its model's reader, the block size, the fleet's map. */
interface Reading {
  readonly reader: ModelReader;
  readonly blockSize: number;
  readonly longestHeld: (keys: readonly number[]) => number;
  readonly untokenized: (blocks: number) => void;
}

const NO_IDS: Ids = new Uint32Array(0);

/** The prompt's block keys as the engine will see its tokens; undefined when the body holds no prompt. */
function promptKeys(reading: Reading, path: string, body: Body): KvKeys {
  const { reader } = reading;
  if (path.endsWith('/chat/completions')) {
    if (!Array.isArray(body.messages)) return undefined;
    const frame = reader.frame;
    const plain = frame === null ? null : plainChat(frame, body);
    if (frame === null || plain === null) {
      const kwargs = body.chat_template_kwargs as Record<string, unknown> | undefined;
      const options = { addGenerationPrompt: true, tools: body.tools, templateKwargs: kwargs };
      return keysAfter(reading, NO_IDS, reader.model.render(body.messages, options), SINGLE_TEXT);
    }
    return chatKeys(reading, frame, plain);
  }
  const prompt = path.endsWith('/generate') ? (body.input_ids ?? body.text) : body.prompt;
  if (Array.isArray(prompt) && prompt.every((x) => typeof x === 'number'))
    return blockKeys(prompt as number[], reading.blockSize, MAX_BLOCKS);
  if (typeof prompt !== 'string') return undefined;
  const cached = reader.cache.get(RAW_PROMPT, prompt);
  if (cached !== undefined) return blockKeys(cached, reading.blockSize, MAX_BLOCKS);
  return keysAfter(reading, NO_IDS, prompt, { ...SINGLE_TEXT, cacheAs: { role: RAW_PROMPT, content: prompt } });
}

/** The cache's role for a raw prompt's ids (no frame around them). */
const RAW_PROMPT = '\u0000prompt';

/**
 * A plain chat's keys from its messages' ids: cached ones at once; the history the cache lacks from
 * the worker, where what precedes it is held; the newest message as far as it may be held.
 */
function chatKeys(reading: Reading, frame: Frame, messages: ReadonlyArray<{ role: string; content: string }>): KvKeys {
  const { reader } = reading;
  const parts = messages.map((m) => reader.cache.get(m.role, m.content));
  const last = messages.length - 1;
  const known = parts.indexOf(undefined);
  if (known < 0) return blockKeys(concat(...(parts as Ids[]), frame.generation), reading.blockSize, MAX_BLOCKS);
  const lastMessage = messages[last];
  const chars = (from: number, to: number) => {
    let sum = 0;
    for (let i = from; i < to; i++) sum += (frame.open.get(messages[i].role)?.length ?? 0) + messages[i].content.length;
    return sum + (to - from) * frame.close.length;
  };
  // A conversation's newest turn is tokenized whole where what precedes it is held: its next turn
  // has it in its history. A single turn (a batch job's prompt) only as far as it may be held.
  const conversation = messages.some((m) => m.role === 'assistant');
  const newest = (history: Ids) =>
    keysAfter(reading, history, messageText(frame, lastMessage.role, lastMessage.content), {
      after: frame.generation,
      cacheAs: lastMessage,
      headFirst: !conversation,
      leadTokensPerChar: history.length / Math.max(1, chars(0, last)),
    });
  if (known === last) return newest(concat(...(parts.slice(0, last) as Ids[])));
  const lead = concat(...(parts.slice(0, known) as Ids[]));
  const leadKeys = blockKeys(lead, reading.blockSize, MAX_BLOCKS);
  if (reading.longestHeld(leadKeys) < leadKeys.length) {
    const perChar = lead.length > 0 ? lead.length / Math.max(1, chars(0, known)) : 1 / CHARS_PER_TOKEN;
    const rest = chars(known, messages.length) * perChar;
    return padded(reading, leadKeys, lead.length + rest + frame.generation.length);
  }
  const history = messages
    .slice(0, last)
    .map((m, i) => parts[i] ?? encodeInto(reader, messageText(frame, m.role, m.content), m));
  return Promise.all(history).then((ids) => newest(concat(...ids)));
}

/** Characters per token assumed where nothing before a text was tokenized either (English prose: ~4). */
const CHARS_PER_TOKEN = 4;
/** A head cut at this many characters per token it must hold (more than any text has: heads run long, not short). */
const HEAD_CHARS_PER_TOKEN = 6;
/** A text with fewer characters than this past its head's cut is tokenized whole. */
const HEAD_MIN_SAVING = 512;

interface TextOptions {
  /** Token ids after the text (a chat's generation prompt). */
  readonly after: Ids;
  /** The cache entry the text's ids are kept under, once tokenized whole (null: not kept). */
  readonly cacheAs: { readonly role: string; readonly content: string } | null;
  /** Tokenize a head of the text first, the whole only where all of the head is held. */
  readonly headFirst: boolean;
  /** The lead's tokens per character, for the estimate of untokenized blocks (0: unknown). */
  readonly leadTokensPerChar: number;
}

const SINGLE_TEXT: TextOptions = { after: NO_IDS, cacheAs: null, headFirst: true, leadTokensPerChar: 0 };

/**
 * The keys of `lead` (token ids known), then `text`, then `after`: `text` tokenized only as far as
 * a backend could hold it (the module's comment).
 */
function keysAfter(reading: Reading, lead: Ids, text: string, opts: TextOptions): KvKeys {
  const { reader, blockSize, longestHeld } = reading;
  const { after, cacheAs } = opts;
  const leadKeys = blockKeys(lead, blockSize, MAX_BLOCKS);
  if (longestHeld(leadKeys) < leadKeys.length) {
    const perChar = opts.leadTokensPerChar > 0 ? opts.leadTokensPerChar : 1 / CHARS_PER_TOKEN;
    return padded(reading, leadKeys, lead.length + text.length * perChar + after.length);
  }
  const whole = () =>
    (cacheAs === null ? reader.worker.encode(text) : encodeInto(reader, text, cacheAs)).then((ids) =>
      blockKeys(concat(lead, ids, after), blockSize, MAX_BLOCKS),
    );
  // Enough tokens to fill the lead's last block and one more, cut before a space (a word ends there
  // in the whole text too); the head's last token is dropped all the same.
  const need = blockSize - (lead.length % blockSize) + blockSize;
  const cut = opts.headFirst ? text.indexOf(' ', need * HEAD_CHARS_PER_TOKEN) : -1;
  if (cut < 0 || text.length - cut < HEAD_MIN_SAVING) return whole();
  return reader.worker.encode(text.slice(0, cut)).then((head) => {
    const stable = head.subarray(0, Math.max(0, head.length - 1));
    const keys = blockKeys(concat(lead, stable), blockSize, MAX_BLOCKS);
    if (longestHeld(keys) === keys.length) return whole();
    const perChar = stable.length / Math.max(1, cut);
    return padded(reading, keys, lead.length + text.length * perChar + after.length);
  });
}

/** `keys`, then a 0 for each block of an estimated `tokens` beyond them (a key no block has); counted. */
function padded(reading: Reading, keys: Keys, tokens: number): Keys {
  const blocks = Math.min(MAX_BLOCKS, Math.floor(tokens / reading.blockSize));
  if (blocks <= keys.length) return keys;
  reading.untokenized(blocks - keys.length);
  const all = new Array<number>(blocks).fill(0);
  for (let i = 0; i < keys.length; i++) all[i] = keys[i];
  return all;
}

/** The worker's ids of a message's (or raw prompt's) text, kept in the cache under its content and role. */
function encodeInto(reader: ModelReader, text: string, as: { readonly role: string; readonly content: string }) {
  return reader.worker.encode(text).then((ids) => {
    reader.cache.set(as.role, as.content, ids);
    return ids;
  });
}

function concat(...parts: Ids[]): Uint32Array {
  let length = 0;
  for (const part of parts) length += part.length;
  const ids = new Uint32Array(length);
  let at = 0;
  for (const part of parts) {
    ids.set(part, at);
    at += part.length;
  }
  return ids;
}
