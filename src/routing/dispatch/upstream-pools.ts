/**
 * One undici keep-alive Pool per backend, created when the backend is added and closed when it is
 * removed. Keyed by the backend's URL, which config and discovery normalise to an origin.
 */
import { type Dispatcher, Pool } from 'undici';
import type { Config } from '../../config/types.js';
import type { Backend, FleetRegistry } from '../../fleet/registry.js';

export type UpstreamRequest = Pick<Dispatcher.DispatchOptions, 'method' | 'path' | 'headers' | 'body'>;

/** undici's callback handler (fleet-attempt.ts's `FleetAttempt`): it is told of a failure by `onError`. */
export type UpstreamHandler = Dispatcher.DispatchHandler & Required<Pick<Dispatcher.DispatchHandler, 'onError'>>;

export class UpstreamPools {
  readonly #pools = new Map<string, Pool>();
  readonly #upstream: Config['upstream'];

  constructor(registry: FleetRegistry, upstream: Config['upstream']) {
    this.#upstream = upstream;
    for (const backend of registry.list()) this.#add(backend);
    registry.on('added', (backend) => this.#add(backend));
    registry.on('removed', (backend) => void this.#remove(backend));
  }

  /**
   * Sends one request on the backend's pool; the handler hears how it goes. A backend removed while
   * its request waited has no pool: the handler hears a closed connection, as from a closed pool, so
   * the attempt ends and the request is re-sent elsewhere instead of waiting for an answer forever.
   */
  dispatch(backend: Backend, request: UpstreamRequest, handler: UpstreamHandler): void {
    const pool = this.#pools.get(backend.url);
    if (!pool) {
      handler.onError(Object.assign(new Error(`no pool for ${backend.url}`), { code: 'UND_ERR_CLOSED' }));
      return;
    }
    pool.dispatch(request, handler);
  }

  /** Open sockets per backend URL (undici's `PoolStats.connected`): a leak shows as a count that only grows. */
  connections(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const [url, pool] of this.#pools) counts.set(url, pool.stats.connected);
    return counts;
  }

  async close(): Promise<void> {
    await Promise.all([...this.#pools.values()].map((pool) => pool.close()));
    this.#pools.clear();
  }

  #add(backend: Backend): void {
    if (this.#pools.has(backend.url)) return;
    this.#pools.set(
      backend.url,
      new Pool(backend.url, {
        connect: { timeout: this.#upstream.connect_timeout },
        headersTimeout: this.#upstream.headers_timeout,
        // undici's bodyTimeout is the longest gap between two body chunks: the stream idle timeout.
        bodyTimeout: this.#upstream.stream_idle_timeout,
        keepAliveTimeout: 4_000,
      }),
    );
  }

  async #remove(backend: Backend): Promise<void> {
    const pool = this.#pools.get(backend.url);
    this.#pools.delete(backend.url);
    await pool?.close();
  }
}
