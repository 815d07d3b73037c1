/**
 * The simulated engine's KV-cache events, published as SGLang (and vLLM) do (docs/sglang-vllm-behaviour.md,
 * "KV-cache events"): a ZeroMQ PUB socket sends `[topic, seq as 8 bytes big-endian, msgpack batch]`,
 * one batch per turn of the event loop (the engines send one per scheduler step), each `BlockStored`
 * a page of the prefix cache with its token ids and its parent's hash, `BlockRemoved` on eviction,
 * `AllBlocksCleared` when the cache empties. The last `bufferSteps` batches are kept for the replay
 * socket (ROUTER: a request `[id, '', start seq]` gets `[id, '', seq, payload]` for each kept batch
 * from `start` on, then `[id, '', -1, '']`). Two switches for tests: `dropSeqs` sends nothing for a
 * range of seqs (they stay replayable, as batches a slow subscriber's HWM dropped would), and
 * `encoding` picks positional arrays (SGLang; vLLM before PR 42892) or maps tagged by `type` at both
 * levels (vLLM after it). Hashes: SGLang's signed int64, vLLM's 32 bytes.
 */
import { createHash } from 'node:crypto';
import { encode } from '@msgpack/msgpack';
import { Publisher, Router } from 'zeromq';
import type { CacheObserver } from './prefix-cache.js';

export interface SimKvEventsOptions {
  /** `tcp://HOST:PORT` to bind; PORT `0` or `*`: any free port (reported in `/server_info`). */
  readonly endpoint: string;
  readonly topic: string;
  readonly replayEndpoint: string | null;
  readonly bufferSteps: number;
  readonly encoding: 'array' | 'map';
  /** Seqs `[from, to]` published to nobody (still replayable); null: none. */
  readonly dropSeqs: readonly [number, number] | null;
}

type Event = unknown[] | Record<string, unknown>;

const END_SEQ = Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);

function seqBytes(seq: number): Buffer {
  const bytes = Buffer.alloc(8);
  bytes.writeBigInt64BE(BigInt(seq));
  return bytes;
}

/** Host and port a bind string names; `*`/0 port: any free one. */
function bindAddress(endpoint: string): string {
  const match = /^tcp:\/\/(.+):(\d+|\*)$/.exec(endpoint);
  if (match === null) throw new TypeError(`kv events endpoint must be tcp://HOST:PORT, got ${endpoint}`);
  return `tcp://${match[1]}:${match[2] === '0' ? '*' : match[2]}`;
}

export class SimKvPublisher implements CacheObserver {
  readonly #opts: SimKvEventsOptions;
  readonly #pageSize: number;
  readonly #kind: 'sglang' | 'vllm';
  readonly #pub = new Publisher({ sendHighWaterMark: 100_000, linger: 0 });
  #router: Router | null = null;
  #pending: Event[] = [];
  #flushScheduled = false;
  #seq = 0;
  readonly #buffer: Array<[number, Uint8Array]> = [];
  #sending: Promise<void> = Promise.resolve();
  #closed = false;
  /** The bound endpoints, once `start` has run. */
  endpoint = '';
  replayEndpoint: string | null = null;

  constructor(opts: SimKvEventsOptions, pageSize: number, kind: 'sglang' | 'vllm') {
    this.#opts = opts;
    this.#pageSize = pageSize;
    this.#kind = kind;
  }

  async start(): Promise<void> {
    await this.#pub.bind(bindAddress(this.#opts.endpoint));
    this.endpoint = this.#pub.lastEndpoint ?? this.#opts.endpoint;
    if (this.#opts.replayEndpoint !== null) {
      const router = new Router({ linger: 0 });
      await router.bind(bindAddress(this.#opts.replayEndpoint));
      this.#router = router;
      this.replayEndpoint = router.lastEndpoint ?? this.#opts.replayEndpoint;
      void this.#serveReplays(router);
    }
  }

  get topic(): string {
    return this.#opts.topic;
  }

  /** The bound PUB port (for `/server_info`). */
  get port(): number {
    return Number(this.endpoint.slice(this.endpoint.lastIndexOf(':') + 1));
  }

  stored(key: string, parent: string | null, tokens: readonly number[]): void {
    const hashes = [this.#hash(key)];
    const parentHash = parent === null ? null : this.#hash(parent);
    if (this.#opts.encoding === 'array') {
      this.#push(['BlockStored', hashes, parentHash, [...tokens], this.#pageSize, null, 'GPU']);
    } else {
      this.#push({
        type: 'BlockStored',
        block_hashes: hashes,
        parent_block_hash: parentHash,
        token_ids: [...tokens],
        block_size: this.#pageSize,
        lora_id: null,
        medium: 'GPU',
        lora_name: null,
        extra_keys: [null],
        group_idx: 0,
        kv_cache_spec_kind: 'full_attention',
      });
    }
  }

  removed(key: string): void {
    const hashes = [this.#hash(key)];
    this.#push(
      this.#opts.encoding === 'array'
        ? ['BlockRemoved', hashes, 'GPU']
        : { type: 'BlockRemoved', block_hashes: hashes, medium: 'GPU', group_idx: 0 },
    );
  }

  cleared(): void {
    this.#push(this.#opts.encoding === 'array' ? ['AllBlocksCleared'] : { type: 'AllBlocksCleared' });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#sending.catch(() => {});
    this.#pub.close();
    this.#router?.close();
  }

  /** SGLang: int64 from the page's SHA-256 (signed); vLLM: the hash bytes themselves. */
  #hash(key: string): bigint | Uint8Array {
    const digest = createHash('sha256').update(key).digest();
    return this.#kind === 'vllm' ? new Uint8Array(digest) : digest.readBigInt64BE(0);
  }

  #push(event: Event): void {
    if (this.#closed) return;
    this.#pending.push(event);
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    setImmediate(() => this.#flush());
  }

  #flush(): void {
    this.#flushScheduled = false;
    if (this.#closed || this.#pending.length === 0) return;
    const events = this.#pending;
    this.#pending = [];
    const ts = Date.now() / 1000;
    const batch =
      this.#opts.encoding === 'array'
        ? [ts, events]
        : { ts, events, ...(this.#kind === 'vllm' ? { data_parallel_rank: 0 } : {}) };
    const payload = encode(batch, { useBigInt64: true });
    const seq = this.#seq++;
    this.#buffer.push([seq, payload]);
    if (this.#buffer.length > this.#opts.bufferSteps) this.#buffer.shift();
    const drop = this.#opts.dropSeqs;
    if (drop !== null && seq >= drop[0] && seq <= drop[1]) return;
    const frames = [this.#opts.topic, seqBytes(seq), payload];
    this.#sending = this.#sending.then(() => this.#pub.send(frames)).catch(() => {});
  }

  async #serveReplays(router: Router): Promise<void> {
    try {
      for await (const frames of router) {
        if (frames.length !== 3) continue;
        const [id, , start] = frames;
        const from = Number(start.readBigInt64BE(0));
        for (const [seq, payload] of [...this.#buffer]) {
          if (seq >= from) await router.send([id, '', seqBytes(seq), payload]);
        }
        await router.send([id, '', END_SEQ, '']);
      }
    } catch {
      // The socket was closed with the server.
    }
  }
}
