/**
 * The block keys of recent chats' histories, by their messages' token ids (the token cache's
 * objects, compared by identity): a conversation's turn is its previous turn's history and two more
 * messages, so only those are hashed, not the whole history again (issue #55: kv-aware's CPU per
 * request). Bounded: `size` histories, least recently used out.
 */
import { concat, extend, type Ids, type Prefix, prefixOf } from './kv-text-keys.js';

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
    if (this.#size > 0 && messages.length > 0)
      this.#remember(messages[messages.length - 1], { messages: messages.slice(), blockSize, prefix });
    return prefix;
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
