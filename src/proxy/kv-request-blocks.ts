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
 * New text is tokenized only as far as an engine could hold it (kv-text-keys.ts); a conversation's
 * newest message, which its next turn repeats, is learned from the engine that prefills it
 * (kv-turn-learner.ts).
 */
import type { ModelConfig } from '../config/types.js';
import { blockKeys } from '../fleet/kv-events/block-keys.js';
import type { StoredListener } from '../fleet/kv-events/kv-block-map.js';
import { BackgroundTokenizer } from '../model/background-tokenizer.js';
import { type Frame, messageText, plainChat, probe } from '../model/chat-frame.js';
import { type ChatModel, loadChatModel } from '../model/chat-model.js';
import { TokenCache } from '../model/token-cache.js';
import { concat, extend, type Ids, MAX_BLOCKS, NO_IDS, PrefixMemo } from './kv-prefix.js';
import {
  CHARS_PER_TOKEN,
  encodeInto,
  type KvKeys,
  keysAfter,
  type ModelReader,
  padded,
  type Reading,
  SINGLE_TEXT,
  watchMessages,
} from './kv-text-keys.js';
import { TurnLearner } from './kv-turn-learner.js';

type Body = Record<string, unknown>;

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
  /** `messages` of a chat were learned from an engine's blocks. */
  readonly learned?: (messages: number) => void;
  /** New text's keys wait for the tokenizer's worker (default); false: keyed on what is known (kv-text-keys.ts). */
  readonly waits?: boolean;
}

export interface KvKeysReader {
  (path: string, json: unknown): KvKeys;
  /** Stops the tokenizer workers. */
  close(): Promise<void>;
  /** Settles once every tokenizer worker has loaded its model (or failed to). */
  ready(): Promise<void>;
  /** Every block the engines store (the map's listener): conversations' newest messages are learned from them. */
  stored: StoredListener;
  /** ms the tokenizer workers have been busy, in all. */
  tokenizerBusyMs(): number;
}

/** Single-turn chats whose messages are learned, at most: about as many conversations as are opened at once. */
const FIRST_TURNS = 1024;

/** Conversations' histories whose block keys are remembered, at most (kv-prefix.ts). */
const HISTORIES = 4096;

/** Null when no model directory is configured: kv-aware then has no keys and falls back. */
export function createKvKeys(opts: KvKeysOptions): KvKeysReader | null {
  // The template is probed here, at start-up, once per model: a few ms of rendering and tokenizing.
  const readerOf = (dir: string): ModelReader => {
    const model = loadChatModel(dir);
    const frame = probe(model);
    const learns = frame !== null && opts.tokenizeWhole !== true && opts.cacheSize > 0;
    return {
      model,
      frame,
      worker: new BackgroundTokenizer(dir),
      cache: new TokenCache(opts.cacheSize),
      firstTurns: new TokenCache(Math.min(opts.cacheSize, FIRST_TURNS)),
      prefixes: new PrefixMemo(Math.min(opts.cacheSize, HISTORIES)),
      learner: learns ? new TurnLearner(frame.closeIds, frame.generation, thinkStart(model)) : null,
    };
  };
  const named = new Map(Object.entries(opts.model.dirs).map(([name, dir]) => [name, readerOf(dir)]));
  const single = opts.model.dir === null ? null : readerOf(opts.model.dir);
  if (single === null && named.size === 0) return null;
  // Tokenizing whole: every run is taken as held on, so each text is tokenized to its end.
  const longestHeld = opts.tokenizeWhole === true ? (keys: readonly number[]) => keys.length : opts.longestHeld;
  const untokenized = opts.untokenized ?? (() => {});
  const learned = opts.learned ?? (() => {});
  const waits = opts.waits ?? true;
  const read = (path: string, json: unknown): KvKeys => {
    const blockSize = opts.blockSize();
    if (blockSize === null || json === null || typeof json !== 'object' || Array.isArray(json)) return undefined;
    const body = json as Body;
    const reader = (typeof body.model === 'string' ? named.get(body.model) : undefined) ?? single;
    if (reader === null) return undefined;
    return promptKeys({ reader, blockSize, longestHeld, untokenized, learned, waits }, path, body);
  };
  const readers = [...named.values(), ...(single === null ? [] : [single])];
  const stored: StoredListener = (parent, key, tokens, from, to) => {
    for (const reader of readers) reader.learner?.stored(parent, key, tokens, from, to);
  };
  return Object.assign(read, {
    close: async () => void (await Promise.all(readers.map((r) => r.worker.close()))),
    ready: async () => void (await Promise.all(readers.map((r) => r.worker.loaded))),
    stored,
    tokenizerBusyMs: () => readers.reduce((sum, r) => sum + r.worker.busyMs, 0),
  });
}

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
  const keep = { entry: { role: RAW_PROMPT, content: prompt }, into: reader.cache };
  return keysAfter(reading, NO_IDS, prompt, { ...SINGLE_TEXT, keep });
}

/** The cache's role for a raw prompt's ids (no frame around them). */
const RAW_PROMPT = '\u0000prompt';

/**
 * A plain chat's keys from its messages' ids: cached ones at once; the history the cache lacks from
 * the worker, where what precedes it is held; the newest message as far as it may be held. A
 * conversation's turn whose only new messages are the last answer and the user's newest is not
 * tokenized at all: both are learned from the engine that prefills it (kv-turn-learner.ts).
 */
function chatKeys(reading: Reading, frame: Frame, messages: ReadonlyArray<{ role: string; content: string }>): KvKeys {
  const { reader } = reading;
  const parts = messages.map((m) => cached(reader, m));
  const last = messages.length - 1;
  const known = parts.indexOf(undefined);
  if (known < 0) return blockKeys(concat(...(parts as Ids[]), frame.generation), reading.blockSize, MAX_BLOCKS);
  const lastMessage = messages[last];
  const chars = (from: number, to: number) => {
    let sum = 0;
    for (let i = from; i < to; i++) sum += (frame.open.get(messages[i].role)?.length ?? 0) + messages[i].content.length;
    return sum + (to - from) * frame.close.length;
  };
  const perChar = (tokens: number, upTo: number) =>
    tokens > 0 ? tokens / Math.max(1, chars(0, upTo)) : 1 / CHARS_PER_TOKEN;
  // A conversation's turn: its last answer and newest message are learned from the engine's prefill,
  // which stores the history anew from the answer on (the engine holds the answer as generated,
  // reasoning first), so only the messages before them need ids now.
  const answer = last - 1;
  const learnsTurn = reader.learner !== null && messages[answer]?.role === 'assistant';
  const turnKeys = (history: Ids[]) => {
    const before = reader.prefixes.of(history, reading.blockSize);
    const keep = (m: { role: string; content: string }) => ({ entry: m, into: reader.cache });
    watchMessages(reading, before, frame.answerOpen, [keep(messages[answer]), keep(lastMessage)], history);
    const answerIds = parts[answer];
    const lead = answerIds === undefined ? before : extend(before, [answerIds], reading.blockSize);
    const through = answerIds === undefined ? answer : last;
    const rest = chars(through, messages.length) * perChar(lead.length, through) + frame.generation.length;
    return padded(reading, lead.keys, lead.length + rest);
  };
  // Otherwise the newest message is tokenized as far as it may be held, and learned from the engine
  // (a conversation's into the cache; a single turn's, a batch job's prompt or a conversation's first,
  // into `firstTurns`); without a learner a conversation's is tokenized whole.
  const conversation = messages.some((m) => m.role === 'assistant');
  const newest = (history: Ids[]) => {
    const lead = concat(...history);
    return keysAfter(reading, lead, messageText(frame, lastMessage.role, lastMessage.content), {
      after: frame.generation,
      keep: { entry: lastMessage, into: conversation ? reader.cache : reader.firstTurns },
      mode: reader.learner === null && conversation ? 'whole' : 'learn',
      leadTokensPerChar: lead.length / Math.max(1, chars(0, last)),
    });
  };
  if (learnsTurn && known >= answer) return turnKeys(parts.slice(0, answer) as Ids[]);
  if (known === last) return newest(parts.slice(0, last) as Ids[]);
  // The cache lacks messages before the last answer: its engine did not store the turn's history
  // anew (a template that keeps the answer as generated), or its blocks were missed. The history is
  // tokenized (the cache keeps it) where an engine holds what precedes it, and the newest message
  // learned on its own, after the answer.
  const lead = concat(...(parts.slice(0, known) as Ids[]));
  const leadKeys = blockKeys(lead, reading.blockSize, MAX_BLOCKS);
  const held = reading.longestHeld(leadKeys) === leadKeys.length;
  const tokenized = () =>
    Promise.all(
      messages
        .slice(0, last)
        .map(
          (m, i) =>
            parts[i] ?? encodeInto(reader, messageText(frame, m.role, m.content), { entry: m, into: reader.cache }),
        ),
    );
  if (held && reading.waits) return tokenized().then(newest);
  // Keyed on what is known; where more could be held, the history is tokenized (and the newest
  // message learned) for the next turn meanwhile.
  if (held) {
    // The engine may store the turn before the worker is done: its blocks are kept for the watch.
    const arrived = reader.learner?.kept.onTheWay();
    tokenized()
      .then(newest)
      .catch(() => {})
      .finally(() => arrived?.());
  }
  const rest = chars(known, messages.length) * perChar(lead.length, known);
  return padded(reading, leadKeys, lead.length + rest + frame.generation.length);
}

/** A message's ids from the cache, or from the first turns' (then kept in the cache: its conversation goes on). */
function cached(reader: ModelReader, m: { role: string; content: string }): Ids | undefined {
  const ids = reader.cache.get(m.role, m.content);
  if (ids !== undefined) return ids;
  const first = reader.firstTurns.get(m.role, m.content);
  if (first !== undefined) reader.cache.set(m.role, m.content, first);
  return first;
}

/** The token a reasoning answer opens with (`<think>`), when the model has one. */
function thinkStart(model: ChatModel): number | null {
  const ids = model.think === null ? [] : model.encode(model.think.start);
  return ids.length === 1 ? ids[0] : null;
}
