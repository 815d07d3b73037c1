/**
 * The I/O of one engine's event stream: a ZeroMQ SUB socket on its PUB endpoint, and a DEALER on its
 * replay endpoint when it has one (the engines' replay socket is a ROUTER that answers one request
 * with many messages, `(seq, payload)` each and then seq -1; a REQ socket would accept only the
 * first, so the request goes as `['', start seq]` from a DEALER). Messages are handled one at a time,
 * in order: a gap is filled from the replay before the next live message is read. What a batch
 * means is the caller's (`onBatch`); this file only reads sockets and judges seqs (kv-stream.ts).
 */
import { Dealer, Subscriber } from 'zeromq';
import { decodeBatch, type KvBatch, KvDecodeError, readFrames, readSeq } from './kv-decode.js';
import { KvStream } from './kv-stream.js';

export interface KvSubscriptionOptions {
  readonly endpoint: string;
  readonly replayEndpoint: string | null;
  readonly topic: string;
  readonly staleForMs: number;
  /** Bound on one replay's wait for each message. */
  readonly replayTimeoutMs: number;
  readonly now: () => number;
  /** A batch to apply. */
  onBatch(batch: KvBatch): void;
  /** The engine restarted (its seqs went back): drop what it held. */
  onRestart(): void;
  /** A gap: `replayed` batches filled it, or none could (`replayed` null: the map is now stale). */
  onGap(missing: number, replayed: number | null): void;
  onDecodeError(error: Error): void;
}

function seqBytes(seq: number): Buffer {
  const bytes = Buffer.alloc(8);
  bytes.writeBigInt64BE(BigInt(seq));
  return bytes;
}

export class KvSubscription {
  readonly #opts: KvSubscriptionOptions;
  readonly #stream: KvStream;
  readonly #sub = new Subscriber({ linger: 0, receiveHighWaterMark: 100_000 });
  #closed = false;
  readonly done: Promise<void>;

  constructor(opts: KvSubscriptionOptions) {
    this.#opts = opts;
    this.#stream = new KvStream(opts.staleForMs);
    this.#sub.connect(opts.endpoint);
    this.#sub.subscribe(opts.topic);
    this.done = this.#run();
  }

  get state(): 'live' | 'stale' {
    return this.#stream.state(this.#opts.now()) === 'stale' ? 'stale' : 'live';
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#sub.close();
  }

  async #run(): Promise<void> {
    try {
      for await (const frames of this.#sub) {
        if (this.#closed) return;
        await this.#handle(frames);
      }
    } catch (error) {
      if (!this.#closed) this.#opts.onDecodeError(error as Error);
    }
  }

  async #handle(frames: readonly Uint8Array[]): Promise<void> {
    let seq: number;
    let payload: Uint8Array;
    try {
      ({ seq, payload } = readFrames(frames));
    } catch (error) {
      this.#opts.onDecodeError(error as Error);
      return;
    }
    let verdict = this.#stream.judge(seq);
    const restart = verdict.kind === 'restart';
    if (restart) {
      this.#opts.onRestart();
      this.#stream.restarted();
      verdict = this.#stream.judge(seq);
    }
    if (verdict.kind === 'gap') {
      const replayed = this.#opts.replayEndpoint === null ? null : await this.#replay(verdict.from, seq);
      this.#opts.onGap(seq - verdict.from, replayed);
      if (this.#closed) return;
      if (replayed === null) this.#stream.lost(seq, this.#opts.now());
      else if (this.#stream.seen(seq)) return;
    }
    this.#apply(seq, payload);
  }

  #apply(seq: number, payload: Uint8Array): void {
    let batch: KvBatch;
    try {
      batch = decodeBatch(payload);
    } catch (error) {
      if (!(error instanceof KvDecodeError)) throw error;
      this.#opts.onDecodeError(error);
      this.#stream.applied(seq);
      return;
    }
    this.#opts.onBatch(batch);
    this.#stream.applied(seq);
    if (batch.events.some((e) => e.type === 'cleared')) this.#stream.settled();
  }

  /**
   * Asks the replay socket for `from` on; applies what fills the gap up to `until` (exclusive) in
   * order. The count applied, or null when the replay could not fill it (no answer in time, or the
   * engine no longer keeps `from`).
   */
  async #replay(from: number, until: number): Promise<number | null> {
    const dealer = new Dealer({ linger: 0, receiveTimeout: this.#opts.replayTimeoutMs });
    let applied = 0;
    try {
      dealer.connect(this.#opts.replayEndpoint as string);
      await dealer.send(['', seqBytes(from)]);
      for (;;) {
        const frames = await dealer.receive();
        const body = frames[0].length === 0 ? frames.slice(1) : frames;
        const seq = readSeq(body[0]);
        if (seq < 0) break;
        if (seq >= until) continue;
        if (this.#stream.seen(seq)) continue;
        if (this.#stream.judge(seq).kind !== 'next') return null;
        this.#apply(seq, body[1]);
        applied++;
      }
    } catch {
      return null;
    } finally {
      dealer.close();
    }
    return this.#stream.next === until ? applied : null;
  }
}
