/**
 * A text's block keys after token ids already known (proxy/kv-request-blocks.ts's chats and
 * prompts), the text tokenized only as far as an engine could hold it: not at all past a lead no
 * engine holds all of; a head first (about two blocks past the lead), whole only where all of it is
 * held; a conversation's newest message learned from the engine that prefills it (kv-turn-learner.ts).
 * Blocks left untokenized are keyed 0, a key no block has (chainKey never returns it), so the policy
 * still sees the prompt's length in blocks, estimated at the tokenized part's tokens per character.
 */
import { blockKeys, chainKey } from '../fleet/kv-events/block-keys.js';
import type { BackgroundTokenizer } from '../model/background-tokenizer.js';
import type { Frame } from '../model/chat-frame.js';
import type { ChatModel } from '../model/chat-model.js';
import type { TokenCache } from '../model/token-cache.js';
import {
  concat,
  extendKnown,
  type Ids,
  type Keys,
  MAX_BLOCKS,
  NO_IDS,
  type Prefix,
  type PrefixMemo,
  prefixOf,
} from './kv-prefix.js';
import type { TurnLearner } from './kv-turn-learner.js';

/** What one model needs: its template, how it frames messages (null: not a plain concatenation), its caches. */
export interface ModelReader {
  readonly model: ChatModel;
  readonly frame: Frame | null;
  readonly worker: BackgroundTokenizer;
  readonly cache: TokenCache;
  /**
   * Single-turn chats' messages learned from the engines: kept apart, and few, so that a batch job's
   * prompts, never seen again, do not push conversations out of `cache`; a second turn moves its
   * first message to `cache`.
   */
  readonly firstTurns: TokenCache;
  /** Conversations' histories' block keys, so that a turn hashes only what its previous turn had not. */
  readonly prefixes: PrefixMemo;
  /** Learns a conversation's new messages from the engine (null: no frame, or tokenizing whole). */
  readonly learner: TurnLearner | null;
}

/**
 * The request's block keys: at once when every text is in the cache, else once the worker has
 * tokenized what is new; undefined when there are none (no model for it, no prompt, block size unknown).
 */
export type KvKeys = readonly number[] | Promise<readonly number[] | undefined> | undefined;

/** One request's reading: its model's reader, the block size, the fleet's map. */
export interface Reading {
  readonly reader: ModelReader;
  readonly blockSize: number;
  readonly longestHeld: (keys: readonly number[]) => number;
  readonly untokenized: (blocks: number) => void;
  /** `messages` of a conversation were learned from an engine's blocks. */
  readonly learned: (messages: number) => void;
  /**
   * Whether new text's keys wait for the worker (`routing.kv_events.tokenize_wait` > 0); if not, a
   * request is keyed on the text known already and the rest is tokenized (or learned) meanwhile.
   */
  readonly waits: boolean;
}

/** The token cache's entry a text's ids are kept under: a message's role and content. */
type CacheEntry = { readonly role: string; readonly content: string };

/** A text's cache entry and the cache its ids go to once known. */
export interface Keep {
  readonly entry: CacheEntry;
  readonly into: TokenCache;
}

/** A head's ids less its last token, which the text after the cut could have merged into another. */
const stableHead = (head: Uint32Array) => head.subarray(0, Math.max(0, head.length - 1));

/** Characters per token assumed where nothing before a text was tokenized either (English prose: ~4). */
export const CHARS_PER_TOKEN = 4;
/** A head cut at this many characters per token it must hold (more than any text has: heads run long, not short). */
const HEAD_CHARS_PER_TOKEN = 6;
/** A message to learn is named by a head of about this many characters. */
const LEARN_HEAD_CHARS = 48;
/** A text with fewer characters than this past its head's cut is tokenized whole. */
const HEAD_MIN_SAVING = 512;

export interface TextOptions {
  /** Token ids after the text (a chat's generation prompt). */
  readonly after: Ids;
  /** Where the text's ids are kept once known (null: not kept). */
  readonly keep: Keep | null;
  /**
   * `head`: tokenize a head of the text first, the whole only where all of the head is held; `learn`:
   * the same, and learn the whole from the engine into `keep` (a chat's newest message); `whole`: at once.
   */
  readonly mode: 'head' | 'learn' | 'whole';
  /** The lead's tokens per character, for the estimate of untokenized blocks (0: unknown). */
  readonly leadTokensPerChar: number;
}

export const SINGLE_TEXT: TextOptions = { after: NO_IDS, keep: null, mode: 'head', leadTokensPerChar: 0 };

/**
 * The keys of `lead` (token ids known), then `text`, then `after`: `text` tokenized only as far as
 * a backend could hold it (the module's comment).
 */
export function keysAfter(reading: Reading, lead: Uint32Array, text: string, opts: TextOptions): KvKeys {
  const { reader, blockSize, longestHeld } = reading;
  const { after, keep } = opts;
  const leadKeys = blockKeys(lead, blockSize, MAX_BLOCKS);
  // Enough tokens to fill the lead's last block and one more, cut before a space (a word ends there
  // in the whole text too); the head's last token is dropped all the same.
  const need = blockSize - (lead.length % blockSize) + blockSize;
  const cut = opts.mode === 'whole' ? -1 : text.indexOf(' ', need * HEAD_CHARS_PER_TOKEN);
  const held = longestHeld(leadKeys) === leadKeys.length;
  if (!held || !reading.waits) {
    // No engine holds the lead whole (a conversation's last answer as the history renders it), so
    // nothing after it matches now; or the request goes on with what is known. The engine that
    // prefills this prompt will hold the newest message for the next turn; other text held after
    // the lead is tokenized for the next request that brings it.
    if (opts.mode === 'learn' && keep !== null) learnLater(reading, prefixOf(lead, blockSize, leadKeys), text, keep);
    else if (held && keep !== null) encodeInto(reader, text, keep).catch(() => {});
    const perChar = opts.leadTokensPerChar > 0 ? opts.leadTokensPerChar : 1 / CHARS_PER_TOKEN;
    return padded(reading, leadKeys, lead.length + text.length * perChar + after.length);
  }
  const whole = () =>
    (keep === null ? reader.worker.encode(text) : encodeInto(reader, text, keep)).then((ids) =>
      blockKeys(concat(lead, ids, after), blockSize, MAX_BLOCKS),
    );
  // A head read to be learned is never tokenized whole later: any saving counts.
  if (cut < 0 || (opts.mode === 'head' && text.length - cut < HEAD_MIN_SAVING)) return whole();
  return reader.worker.encode(text.slice(0, cut)).then((head) => {
    const stable = stableHead(head);
    const keys = blockKeys(concat(lead, stable), blockSize, MAX_BLOCKS);
    if (longestHeld(keys) === keys.length) return whole();
    if (opts.mode === 'learn' && keep !== null)
      watchMessages(reading, prefixOf(lead, blockSize, leadKeys), stable, [keep]);
    const perChar = stable.length / Math.max(1, cut);
    return padded(reading, keys, lead.length + text.length * perChar + after.length);
  });
}

/**
 * Watches for the engine's blocks of `messages`, which follow `lead` (ids known) and begin with
 * `then` (an answer's opening, a head); keeps each message's ids once seen, and, given the
 * `history` whose keys `lead` is, the keys through them from the engine's blocks (the next turn
 * hashes none of it).
 */
export function watchMessages(
  reading: Reading,
  lead: Prefix,
  then: Ids,
  messages: readonly Keep[],
  history?: readonly Ids[],
): void {
  const { reader, blockSize } = reading;
  const whole = lead.keys.length * blockSize + lead.tail.length === lead.length;
  if (reader.learner === null || lead.keys.length === 0 || !whole) return;
  // The chain hangs from the lead's last full block or, where an engine held more of what the
  // messages begin with (an answer's opening, a head other prompts share), from a block further in.
  const expect = concat(lead.tail, then);
  const starts = [{ parent: lead.keys[lead.keys.length - 1], at: 0 }];
  for (let at = blockSize; at <= expect.length; at += blockSize)
    starts.push({ parent: chainKey(starts[starts.length - 1].parent, expect, at - blockSize, at), at });
  reader.learner.watch({ starts, expect, skip: lead.tail.length, count: messages.length }, (ids, chainKeys) => {
    // Another prompt on the same lead (a retried turn, edited) could give other messages: each is
    // kept only at a plausible 1.5 to 12 characters per token.
    const plausible = (i: number) => {
      const chars = messageChars(reader, messages[i].entry);
      return ids[i].length * 1.5 <= chars && ids[i].length * 12 >= chars;
    };
    if (!ids.every((_, i) => plausible(i))) return;
    const kept = messages.map(({ entry, into }, i) => into.keep(entry.role, entry.content, ids[i]));
    reading.learned(ids.length);
    if (history === undefined || chainKeys === null) return;
    const known = extendKnown(lead, ids, chainKeys, blockSize);
    if (known !== null) reader.prefixes.remember([...history, ...kept], blockSize, known);
  });
}

/** A message's characters as framed (its open and close included), for the plausibility check. */
function messageChars(reader: ModelReader, { role, content }: CacheEntry): number {
  const frame = reader.frame;
  return content.length + (frame === null ? 0 : (frame.open.get(role)?.length ?? 0) + frame.close.length);
}

/**
 * Learns the message in the background while its request goes on: a short one is tokenized whole
 * into the cache; a long one's head is, then watched for (replaying the blocks stored meanwhile).
 * Refused or failed tokenizing only means its next turn tokenizes it.
 */
function learnLater(reading: Reading, lead: Prefix, text: string, keep: Keep): void {
  const { reader } = reading;
  // Routing needs none of it now: the head only names the message's chain among others on its lead.
  const cut = text.indexOf(' ', LEARN_HEAD_CHARS);
  if (cut < 0 || reader.learner === null) {
    encodeInto(reader, text, keep).catch(() => {});
    return;
  }
  // The engine may store the chain before the head is back: its blocks are kept for the watch.
  const arrived = reader.learner.kept.onTheWay();
  reader.worker.encode(text.slice(0, cut)).then((head) => {
    watchMessages(reading, lead, stableHead(head), [keep]);
    arrived();
  }, arrived);
}

/** `keys`, then a 0 for each block of an estimated `tokens` beyond them (a key no block has); counted. */
export function padded(reading: Reading, keys: Keys, tokens: number): Keys {
  const blocks = Math.min(MAX_BLOCKS, Math.floor(tokens / reading.blockSize));
  if (blocks <= keys.length) return keys;
  reading.untokenized(blocks - keys.length);
  const all = new Array<number>(blocks).fill(0);
  for (let i = 0; i < keys.length; i++) all[i] = keys[i];
  return all;
}

/** The worker's ids of a message's (or raw prompt's) text, kept under its content and role. */
export function encodeInto(reader: ModelReader, text: string, { entry, into }: Keep) {
  return reader.worker.encode(text).then((ids) => {
    into.set(entry.role, entry.content, ids);
    return ids;
  });
}
