/**
 * An OTLP/HTTP receiver that takes every export and keeps only counts: where `fleetgate-tracing`
 * sends its spans in the overhead bench, so that tracing's cost is fleetgate's own (the sink runs
 * on the client's core).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export class OtlpSink {
  exports = 0;
  bytes = 0;
  readonly #server: Server;

  private constructor() {
    this.#server = createServer((req, res) => {
      req.on('data', (chunk: Buffer) => {
        this.bytes += chunk.length;
      });
      req.on('end', () => {
        this.exports++;
        // An empty ExportTraceServiceResponse: zero bytes in protobuf.
        res.writeHead(200, { 'content-type': 'application/x-protobuf' });
        res.end();
      });
    });
  }

  static async start(): Promise<OtlpSink> {
    const sink = new OtlpSink();
    await new Promise<void>((resolve) => sink.#server.listen(0, '127.0.0.1', resolve));
    return sink;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}
