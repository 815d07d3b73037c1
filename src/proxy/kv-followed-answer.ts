/**
 * An engine's answer, followed block by block after the prompt a watch learned (kv-turn-learner.ts),
 * for templates that keep an answer in the history as generated: the engine holds it already, so the
 * next turn's prefill stores from inside it, and the next turn's watch takes the chain up after any
 * of its blocks. An answer that opens with reasoning is not followed (the history drops it), nor one
 * longer than `MAX_TOKENS`. Pure.
 */

/** An answer followed further than this many tokens is given up. */
const MAX_TOKENS = 2048;

/**
 * A block key a chain's first stored block may hang from, how many tokens of the chain precede that
 * block, and which they are when not the watch's expected ones (an answer the engine held).
 */
export interface ChainStart {
  readonly parent: number;
  readonly at: number;
  readonly pre?: ArrayLike<number>;
}

/** Where a done watch's chain stands: its tokens from `skip` on, and where its prompt ended in the chain. */
export interface DoneChain {
  readonly skip: number;
  readonly collected: readonly number[];
  readonly promptEnd: number;
}

export class FollowedAnswer {
  /** The chain's tokens from the end of the block it is filed under: the prompt's partial last block, then the answer's. */
  readonly tokens: number[];
  /** The keys of the blocks followed, in order, and where each ends in `tokens`. */
  readonly keys: number[] = [];
  readonly ends: number[] = [];

  /** `at`: the key of the block the prompt's last full block is; `opens`: where the answer starts in `tokens`. */
  private constructor(
    readonly at: number,
    tokens: number[],
    readonly opens: number,
  ) {
    this.tokens = tokens;
  }

  /**
   * The answer after a chain done at a block (`key`, hanging from `previous`, `blockSize` tokens), or
   * null when the prompt's last full block is neither (a prompt ending earlier in this block).
   */
  static after(chain: DoneChain, previous: number, key: number, blockSize: number): FollowedAnswer | null {
    const { skip, collected, promptEnd } = chain;
    // The chain starts at a block boundary.
    const chainEnd = skip + collected.length;
    const boundary = Math.floor(promptEnd / blockSize) * blockSize;
    const at = boundary === chainEnd ? key : boundary === chainEnd - blockSize ? previous : null;
    if (at === null || boundary < skip) return null;
    const answer = new FollowedAnswer(at, collected.slice(boundary - skip), promptEnd - boundary);
    if (boundary < chainEnd) {
      answer.keys.push(key);
      answer.ends.push(answer.tokens.length);
    }
    return answer;
  }

  /** The answer's next block. */
  add(key: number, tokens: readonly number[], from: number, to: number): void {
    for (let i = from; i < to; i++) this.tokens.push(tokens[i]);
    this.keys.push(key);
    this.ends.push(this.tokens.length);
  }

  /** Not when it opens with reasoning (`thinkStart`: the history drops it), nor once too long. */
  worthFollowing(thinkStart: number | null): boolean {
    const { tokens, opens } = this;
    return tokens.length <= MAX_TOKENS && (tokens.length <= opens || tokens[opens] !== thinkStart);
  }

  /**
   * Where a watch whose `start` is this answer's block may take its chain up: after any of the
   * answer's blocks, the tokens before known; none when the watch expects other tokens than these.
   */
  startsFor(start: ChainStart, expect: ArrayLike<number>): ChainStart[] {
    const pre = [...Array.from(expect).slice(0, start.at), ...this.tokens];
    for (let i = start.at; i < expect.length; i++) if (pre[i] !== expect[i]) return [];
    return this.keys.map((parent, i) => ({ parent, at: start.at + this.ends[i], pre }));
  }
}
