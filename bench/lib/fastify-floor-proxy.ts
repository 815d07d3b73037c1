/**
 * The floor of fleetgate's own stack: bare fastify + @fastify/http-proxy over an undici dispatcher
 * that picks the backend with the fewest requests in flight, one Pool per backend with no cap on
 * connections (undici's default per-origin cap would collapse 1,000 streams). No readiness, queue,
 * retries, metrics or SSE guard. Not a product: the `fastify-floor` target of bench:overhead, to
 * tell what part of fleetgate's cost is the stack's own.
 * Usage: node --import tsx bench/lib/fastify-floor-proxy.ts PORT BACKEND_URL...
 */
import httpProxy from '@fastify/http-proxy';
import Fastify from 'fastify';
import { Dispatcher, Pool } from 'undici';

interface LegacyHandler {
  onConnect(abort: (error: Error) => void, context?: unknown): void;
  onHeaders(status: number, headers: Buffer[], resume: () => void, message?: string): boolean;
  onData(chunk: Buffer): boolean;
  onComplete(trailers: Buffer[] | null): void;
  onError(error: Error): void;
}

const [portText, ...backends] = process.argv.slice(2);

class LeastConnections extends Dispatcher {
  readonly pools = backends.map((url) => ({ pool: new Pool(url, { keepAliveTimeout: 60_000 }), inflight: 0 }));

  override dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    let best = this.pools[0];
    for (const entry of this.pools) if (entry.inflight < best.inflight) best = entry;
    const picked = best;
    picked.inflight++;
    let done = false;
    const release = () => {
      if (done) return;
      done = true;
      picked.inflight--;
    };
    // reply-from calls `request()`, whose handler is undici's old-style RequestHandler.
    const inner = handler as LegacyHandler;
    const counted: LegacyHandler = {
      onConnect: (abort, context) => inner.onConnect(abort, context),
      onHeaders: (status, headers, resume, message) => inner.onHeaders(status, headers, resume, message),
      onData: (chunk) => inner.onData(chunk),
      onComplete: (trailers) => {
        release();
        inner.onComplete(trailers);
      },
      onError: (error) => {
        release();
        inner.onError(error);
      },
    };
    return picked.pool.dispatch({ ...opts, origin: undefined }, counted as never);
  }
}

const app = Fastify({ logger: false });
app.register(httpProxy, {
  upstream: 'http://floor.invalid',
  undici: new LeastConnections() as unknown as { request: Dispatcher['request'] },
  disableRequestLogging: true,
});
app.listen({ host: '127.0.0.1', port: Number(portText) }).then(() => {
  app.server.keepAliveTimeout = 75_000;
});
process.once('SIGTERM', () => process.exit(0));
