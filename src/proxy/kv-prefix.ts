/**
 * Known tokens as block keys see them (issue #55): the keys of their full blocks, the tokens after
 * those, and a memo of recent chats' histories by their messages' token ids (the token cache's
 * objects, compared by identity): a conversation's turn is its previous turn's history and two more
 * messages, whose keys the engine's blocks gave already (`extendKnown`, remembered when they are
 * learned) or, failing that, are hashed on their own, never the whole history again. Pure, but for
 * the memo's bound.
 */
import { blockKeys, chainKey, ROOT_KEY } from '../fleet/kv-events/block-keys.js';

/** Block keys beyond this many are not computed: a longer prompt is told apart by its start already. */
export const MAX_BLOCKS = 1024;

export type Ids = ArrayLike<number>;
export type Keys = readonly number[];

export const NO_IDS = new Uint32Array(0);

/**
 * Known tokens as keys see them: their full blocks' keys (at most `MAX_BLOCKS`), the tokens after
 * those (none once `MAX_BLOCKS` is reached), and how many in all.
 */
export interface Prefix {
  readonly keys: Keys;
  readonly tail: Ids;
  readonly length: number;
}

export function prefixOf(
  ids: Uint32Array,
  blockSize: number,
  keys: Keys = blockKeys(ids, blockSize, MAX_BLOCKS),
): Prefix {
  const tail = keys.length < MAX_BLOCKS ? ids.subarray(keys.length * blockSize) : NO_IDS;
  return { keys, tail, length: ids.length };
}

/** `prefix` followed by `more`: only the new tokens are hashed, a block at a time (no copy of them all). */
export function extend(prefix: Prefix, more: readonly Ids[], blockSize: number): Prefix {
  const keys = prefix.keys.slice();
  let length = prefix.length;
  for (const part of more) length += part.length;
  if (keys.length >= MAX_BLOCKS) return { keys, tail: NO_IDS, length };
  const block = new Uint32Array(blockSize);
  block.set(prefix.tail);
  let fill = prefix.tail.length;
  let parent = keys.length > 0 ? keys[keys.length - 1] : ROOT_KEY;
  for (const part of more) {
    let i = 0;
    while (i < part.length) {
      if (fill === 0 && part.length - i >= blockSize) {
        // A whole block in `part`: hashed where it lies.
        parent = chainKey(parent, part, i, i + blockSize);
        i += blockSize;
      } else {
        block[fill++] = part[i++];
        if (fill < blockSize) continue;
        parent = chainKey(parent, block, 0, blockSize);
        fill = 0;
      }
      keys.push(parent);
      if (keys.length >= MAX_BLOCKS) return { keys, tail: NO_IDS, length };
    }
  }
  return { keys, tail: block.subarray(0, fill), length };
}

/**
 * `lead` followed by `more`, the keys of whose blocks (from the lead's last full block on) an
 * engine's events gave already (kv-turn-learner.ts): nothing is hashed. Null past `MAX_BLOCKS` or
 * when the keys fall short.
 */
export function extendKnown(lead: Prefix, more: readonly Ids[], chainKeys: Keys, blockSize: number): Prefix | null {
  let chain = lead.tail.length;
  for (const part of more) chain += part.length;
  const full = Math.floor(chain / blockSize);
  const before = lead.keys.length;
  if (chainKeys.length < full || before + full > MAX_BLOCKS) return null;
  const keys = new Array<number>(before + full);
  for (let i = 0; i < before; i++) keys[i] = lead.keys[i];
  for (let i = 0; i < full; i++) keys[before + i] = chainKeys[i];
  // The tail: the chain's tokens after its last full block, the end of `more` (or of the lead's tail too).
  const tail = new Uint32Array(chain - full * blockSize);
  let at = tail.length;
  for (let p = more.length - 1; p >= -1 && at > 0; p--) {
    const part = p < 0 ? lead.tail : more[p];
    const take = Math.min(at, part.length);
    for (let i = 0; i < take; i++) tail[at - take + i] = part[part.length - take + i];
    at -= take;
  }
  return { keys, tail, length: lead.length - lead.tail.length + chain };
}

export function concat(...parts: Ids[]): Uint32Array {
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

/** The block keys of recent chats' histories, `size` at most, least recently used out. */
interface Memo {
  /** The messages' ids, in order: a history matches only with these very objects. */
  readonly messages: readonly Ids[];
  readonly blockSize: number;
  readonly prefix: Prefix;
}

export class PrefixMemo {
  readonly #size: number;
  /** By the history's last message's ids. */
  readonly #byLast = new Map<Ids, Memo>();

  constructor(size: number) {
    this.#size = size;
  }

  /** The keys of `messages` (ids, in order), from the longest history remembered that they go on from. */
  of(messages: readonly Ids[], blockSize: number): Prefix {
    let prefix: Prefix | undefined;
    for (let last = messages.length - 1; last >= 0 && prefix === undefined; last--) {
      const memo = this.#byLast.get(messages[last]);
      if (memo === undefined || memo.blockSize !== blockSize || !startsWith(messages, memo.messages)) continue;
      const from = memo.messages.length;
      prefix = from === messages.length ? memo.prefix : extend(memo.prefix, messages.slice(from), blockSize);
    }
    prefix ??= prefixOf(concat(...messages), blockSize);
    this.remember(messages.slice(), blockSize, prefix);
    return prefix;
  }

  /** `prefix` as the keys of `messages` (ids, in order, not changed after): their `of` takes it as it is. */
  remember(messages: readonly Ids[], blockSize: number, prefix: Prefix): void {
    if (this.#size > 0 && messages.length > 0)
      this.#remember(messages[messages.length - 1], { messages, blockSize, prefix });
  }

  #remember(last: Ids, memo: Memo): void {
    this.#byLast.delete(last);
    this.#byLast.set(last, memo);
    if (this.#byLast.size > this.#size) this.#byLast.delete(this.#byLast.keys().next().value as Ids);
  }
}

function startsWith(messages: readonly Ids[], start: readonly Ids[]): boolean {
  if (start.length > messages.length) return false;
  for (let i = 0; i < start.length; i++) if (messages[i] !== start[i]) return false;
  return true;
}
