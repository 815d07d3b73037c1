/**
 * One event stream's sequence numbers, judged (pure; the clock comes in as `now`). The engines
 * number batches from 0 per process (SGLang's and vLLM's `ZmqEventPublisher`), so a seq back at 0
 * after others is a restart (its cache is empty again), a seq beyond the next is a gap (batches lost:
 * the PUB socket's HWM, a slow joiner, a reconnect), and a live one below the next a restart whose
 * first batches may be missing too (then a gap from 0).
 * A gap the replay socket cannot fill makes the stream `stale`: its map is dropped (missed removals
 * would leave blocks it no longer holds) and rebuilt from the events that follow, and the stream is
 * trusted again once `staleForMs` passed without another gap, or at once on `AllBlocksCleared`
 * (the engine's cache is then known exactly: empty).
 */

export type KvState = 'live' | 'stale' | 'off';

export type SeqVerdict =
  /** Apply it. */
  | { kind: 'next' }
  /** The engine restarted (a live seq below the next): drop its map, then judge it afresh. */
  | { kind: 'restart' }
  /** Batches `from`..seq-1 are missing. */
  | { kind: 'gap'; from: number };

export class KvStream {
  readonly #staleForMs: number;
  #next: number | null = null;
  #staleSince: number | null = null;

  constructor(staleForMs: number) {
    this.#staleForMs = staleForMs;
  }

  /** The seq expected next (null before the first). */
  get next(): number | null {
    return this.#next;
  }

  judge(seq: number): SeqVerdict {
    const next = this.#next;
    if (next === null) return seq === 0 ? { kind: 'next' } : { kind: 'gap', from: 0 };
    if (seq === next) return { kind: 'next' };
    // A live stream never goes back: the publisher restarted (its seqs start at 0 again).
    if (seq < next) return { kind: 'restart' };
    return { kind: 'gap', from: next };
  }

  /** The engine restarted: its next seq is judged as a first one. */
  restarted(): void {
    this.#next = null;
  }

  /** During a replay: whether `seq` was applied already (the replay's overlap). */
  seen(seq: number): boolean {
    return this.#next !== null && seq < this.#next;
  }

  /** Batch `seq` was applied. */
  applied(seq: number): void {
    this.#next = seq + 1;
  }

  /** A gap no replay filled: stale from `now`, and the next seq is taken as it comes. */
  lost(seq: number, now: number): void {
    this.#staleSince = now;
    this.#next = seq;
  }

  /** The engine's cache is known exactly again (AllBlocksCleared applied). */
  settled(): void {
    this.#staleSince = null;
  }

  state(now: number): KvState {
    if (this.#staleSince === null) return 'live';
    if (now - this.#staleSince >= this.#staleForMs) {
      this.#staleSince = null;
      return 'live';
    }
    return 'stale';
  }
}
