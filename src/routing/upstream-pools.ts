/**
 * One undici keep-alive Pool per backend, created when the backend is added and closed when it is
 * removed. Keyed by the backend's URL, which config and discovery normalise to an origin.
 */
import { type Dispatcher, Pool } from 'undici';
import type { Config } from '../config/types.js';
import type { Backend, FleetRegistry } from '../fleet/registry.js';

export type UpstreamRequest = Pick<Dispatcher.DispatchOptions, 'method' | 'path' | 'headers' | 'body'>;

export class UpstreamPools {
  readonly #pools = new Map<string, Pool>();
  readonly #upstream: Config['upstream'];

  constructor(registry: FleetRegistry, upstream: Config['upstream']) {
    this.#upstream = upstream;
    for (const backend of registry.list()) this.#add(backend);
    registry.on('added', (backend) => this.#add(backend));
    registry.on('removed', (backend) => void this.#remove(backend));
  }

  /** Sends one request on the backend's pool; the handler hears how it goes. */
  dispatch(backend: Backend, request: UpstreamRequest, handler: Dispatcher.DispatchHandler): void {
    const pool = this.#pools.get(backend.url);
    if (!pool) {
      const closed = Object.assign(new Error(`no pool for ${backend.url}`), { code: 'UND_ERR_CLOSED' });
      handler.onResponseError?.(undefined as never, closed);
      return;
    }
    pool.dispatch(request, handler);
  }

  /**
   * Opens `connections` keep-alive connections to the backend (the start-up warm-up): as many
   * `GET /v1/models` at once, which SGLang and vLLM answer from their HTTP process alone (no GPU
   * work, unlike SGLang's `/health`). They stay open for the pool's keep-alive timeout.
   */
  async preconnect(backend: Backend, connections: number): Promise<void> {
    const pool = this.#pools.get(backend.url);
    if (!pool) return;
    const headers: Record<string, string> = {};
    if (this.#upstream.api_key !== null) headers.authorization = `Bearer ${this.#upstream.api_key}`;
    await Promise.all(
      Array.from({ length: connections }, async () => {
        try {
          const res = await pool.request({ method: 'GET', path: '/v1/models', headers });
          await res.body.dump();
        } catch {
          // A backend that refuses it is judged by the prober; the warm-up only loses a connection.
        }
      }),
    );
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
