/** The one HTTP server, with the limits of `limits.*` (fastify sets some only on a server it creates itself). */
import { createServer, type RequestListener, type Server } from 'node:http';
import type { Config } from '../config/types.js';

export function createHttpServer(limits: Config['limits'], listener: RequestListener): Server {
  const server = createServer(
    {
      maxHeaderSize: limits.header_size,
      // Node enforces the headers and request timeouts only when it checks its connections,
      // every 30 s by default: a slowloris client would hold a socket that long.
      connectionsCheckingInterval: Math.min(30_000, Math.max(100, Math.floor(limits.headers_timeout / 4))),
    },
    listener,
  );
  server.headersTimeout = limits.headers_timeout;
  // The client's request must arrive in time; the response (a long generation) has no limit here.
  server.requestTimeout = Math.max(limits.headers_timeout, 120_000);
  server.keepAliveTimeout = limits.keep_alive_timeout;
  if (limits.max_connections > 0) server.maxConnections = limits.max_connections;
  return server;
}
