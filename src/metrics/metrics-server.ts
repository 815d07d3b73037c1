/** The optional separate listener (`metrics_listen`): serves only `GET /metrics`. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { HostPort } from '../config/types.js';

export interface MetricsSource {
  readonly contentType: string;
  render(): Promise<string>;
}

export class MetricsServer {
  readonly #server: Server;

  private constructor(server: Server) {
    this.#server = server;
  }

  static async start(address: HostPort, source: MetricsSource): Promise<MetricsServer> {
    const server = createServer((request, response) => {
      const path = (request.url ?? '/').split('?')[0];
      if (path !== '/metrics' || (request.method !== 'GET' && request.method !== 'HEAD')) {
        response.writeHead(404, { 'content-type': 'text/plain' }).end('not found; metrics are at /metrics\n');
        return;
      }
      source.render().then(
        (body) => {
          response.writeHead(200, { 'content-type': source.contentType });
          response.end(request.method === 'HEAD' ? undefined : body);
        },
        (error: unknown) => {
          response.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${String(error)}\n`);
        },
      );
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(address.port, address.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    return new MetricsServer(server);
  }

  /** `http://host:port` actually bound (port 0 resolved). */
  get url(): string {
    const { address, port, family } = this.#server.address() as AddressInfo;
    return `http://${family === 'IPv6' ? `[${address}]` : address}:${port}`;
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }
}
