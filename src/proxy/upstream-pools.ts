/**
 * One undici keep-alive Pool per backend, created when the backend is added and closed when it is
 * removed. Handed to reply-from as its `undici` requestable, which routes each request by origin.
 */
import { type Dispatcher, Pool } from 'undici';
import type { Config } from '../config/types.js';
import type { Backend, FleetRegistry } from '../fleet/registry.js';
import type { AbortLike } from './client-gone.js';

type RequestOptions = Dispatcher.RequestOptions;
type RequestCallback = (err: Error | null, data: Dispatcher.ResponseData) => void;

export class UpstreamPools {
  readonly #pools = new Map<string, Pool>();
  readonly #upstream: Config['upstream'];
  /**
   * The abort signal of the request being forwarded. reply-from calls `request()` synchronously
   * from `reply.from()`, so the forwarder sets this right before and clears it right after.
   */
  currentSignal: AbortLike | null = null;

  constructor(registry: FleetRegistry, upstream: Config['upstream']) {
    this.#upstream = upstream;
    for (const backend of registry.list()) this.#add(backend);
    registry.on('added', (backend) => this.#add(backend));
    registry.on('removed', (backend) => void this.#remove(backend));
  }

  /** reply-from's requestable: routes by origin to the backend's own pool. */
  readonly requestable = {
    request: (opts: RequestOptions, callback: RequestCallback): void => {
      const pool = this.#pools.get(String(opts.origin));
      if (!pool) {
        callback(
          Object.assign(new Error(`no pool for ${String(opts.origin)}`), { code: 'UND_ERR_CLOSED' }),
          undefined as never,
        );
        return;
      }
      // undici accepts any object with add/removeEventListener('abort') and `aborted`.
      if (this.currentSignal !== null) opts.signal = this.currentSignal as unknown as AbortSignal;
      pool.request(opts, callback);
    },
  };

  async close(): Promise<void> {
    await Promise.all([...this.#pools.values()].map((pool) => pool.close()));
    this.#pools.clear();
  }

  #add(backend: Backend): void {
    const origin = new URL(backend.url).origin;
    if (this.#pools.has(origin)) return;
    this.#pools.set(
      origin,
      new Pool(origin, {
        connect: { timeout: this.#upstream.connect_timeout },
        headersTimeout: this.#upstream.headers_timeout,
        // undici's bodyTimeout is the longest gap between two body chunks: the stream idle timeout.
        bodyTimeout: this.#upstream.stream_idle_timeout,
        keepAliveTimeout: 4_000,
      }),
    );
  }

  async #remove(backend: Backend): Promise<void> {
    const origin = new URL(backend.url).origin;
    const pool = this.#pools.get(origin);
    this.#pools.delete(origin);
    await pool?.close();
  }
}
