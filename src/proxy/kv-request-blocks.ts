/**
 * A request's block keys for `kv-aware` (fleet/kv-events/block-keys.ts, over the token ids the
 * engine will see): the model's chat template and tokenizer, as the engines apply them. Both cost
 * CPU (rendering a 6 KB chat with @huggingface/jinja ~0.45 ms, tokenizing it ~3 ms), so a chat is
 * read per message: at first sight of a model its template is probed with marker messages for how
 * it wraps each message (`<|im_start|>user\n` ... `<|im_end|>\n` for ChatML) and checked to be a
 * plain concatenation whose message boundaries are special tokens (so tokenizing message by message
 * gives exactly the whole prompt's ids); then a request's ids are its messages' ids, each from a
 * bounded cache (`token_cache` messages, least recently used out: a conversation's system prompt
 * and earlier turns repeat in every request). A chat the probe does not cover (tools, tool calls,
 * non-text content, template kwargs, a think block in a message, a last message not the user's) or
 * a template that is no plain concatenation is rendered and tokenized whole; a raw prompt is
 * tokenized whole, token-id prompts are taken as they are.
 */
import type { ModelConfig } from '../config/types.js';
import { blockKeys } from '../fleet/kv-events/block-keys.js';
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

/** Token ids by text, least recently used out beyond `size`. */
class TokenCache {
  readonly #size: number;
  readonly #entries = new Map<string, readonly number[]>();

  constructor(size: number) {
    this.#size = size;
  }

  get(text: string, encode: (text: string) => number[]): readonly number[] {
    const hit = this.#entries.get(text);
    if (hit !== undefined) {
      this.#entries.delete(text);
      this.#entries.set(text, hit);
      return hit;
    }
    const ids = encode(text);
    if (this.#size > 0) {
      this.#entries.set(text, ids);
      if (this.#entries.size > this.#size) this.#entries.delete(this.#entries.keys().next().value as string);
    }
    return ids;
  }
}

export interface KvKeysOptions {
  readonly model: ModelConfig;
  /** Tokens per block the engines key at; null while none is known (no keys then). */
  readonly blockSize: () => number | null;
  /** Messages whose ids are kept (`routing.kv_events.token_cache`). */
  readonly cacheSize: number;
}

/** The request's block keys, or undefined (no model for it, no prompt, block size unknown). */
export type KvKeysReader = (path: string, json: unknown) => number[] | undefined;

/** Null when no model directory is configured: kv-aware then has no keys and falls back. */
export function createKvKeys(opts: KvKeysOptions): KvKeysReader | null {
  const named = new Map(Object.entries(opts.model.dirs).map(([name, dir]) => [name, loadChatModel(dir)]));
  const single = opts.model.dir === null ? null : loadChatModel(opts.model.dir);
  if (single === null && named.size === 0) return null;
  const frames = new Map<ChatModel, Frame | null>();
  const caches = new Map<ChatModel, TokenCache>();
  return (path, json) => {
    const blockSize = opts.blockSize();
    if (blockSize === null || json === null || typeof json !== 'object' || Array.isArray(json)) return undefined;
    const body = json as Body;
    const model = (typeof body.model === 'string' ? named.get(body.model) : undefined) ?? single;
    if (model === null) return undefined;
    let cache = caches.get(model);
    if (cache === undefined) {
      cache = new TokenCache(opts.cacheSize);
      caches.set(model, cache);
    }
    const ids = tokenIds(model, frames, cache, path, body);
    return ids === null ? undefined : blockKeys(ids, blockSize, MAX_BLOCKS);
  };
}

function tokenIds(
  model: ChatModel,
  frames: Map<ChatModel, Frame | null>,
  cache: TokenCache,
  path: string,
  body: Body,
): readonly number[] | null {
  const encode = (text: string) => model.encode(text);
  if (path.endsWith('/chat/completions')) {
    if (!Array.isArray(body.messages)) return null;
    if (!frames.has(model)) frames.set(model, probe(model));
    const frame = frames.get(model) ?? null;
    const plain = frame === null ? null : plainChat(frame, body);
    if (frame === null || plain === null) {
      const kwargs = body.chat_template_kwargs as Record<string, unknown> | undefined;
      return encode(
        model.render(body.messages, { addGenerationPrompt: true, tools: body.tools, templateKwargs: kwargs }),
      );
    }
    const ids: number[] = [];
    for (const m of plain) for (const id of cache.get(messageText(frame, m.role, m.content), encode)) ids.push(id);
    for (const id of frame.generation) ids.push(id);
    return ids;
  }
  const prompt = path.endsWith('/generate') ? (body.input_ids ?? body.text) : body.prompt;
  if (Array.isArray(prompt) && prompt.every((x) => typeof x === 'number')) return prompt as number[];
  return typeof prompt === 'string' ? encode(prompt) : null;
}
