/**
 * A misbehaving backend for hardening tests: a raw TCP server that speaks just enough HTTP/1.1 to
 * pass an `openai`-kind readiness check (`GET /v1/models` 200) and hands every other request to a
 * handler that may write anything (a bad status line, a short body, a stream that stalls).
 * Each connection serves one request and is then closed by the handler (or left open to stall).
 */
import { createServer, type Socket } from 'node:net';

export interface RawRequest {
  method: string;
  path: string;
  /** Lower-cased names. */
  headers: Record<string, string>;
  body: string;
}

export type RawHandler = (socket: Socket, request: RawRequest) => void;

export interface RawBackend {
  url: string;
  port: number;
  /** Every request but readiness probes, in arrival order. */
  seen: RawRequest[];
}

export function writeJson(socket: Socket, status: number, body: unknown, extraHeaders = ''): void {
  const text = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${status} X\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\n` +
      `Connection: close\r\n${extraHeaders}\r\n${text}`,
  );
}

const PROBES = new Set(['/v1/models', '/health', '/metrics']);

export async function startRawBackend(t: { after(fn: () => unknown): void }, handle: RawHandler): Promise<RawBackend> {
  const sockets = new Set<Socket>();
  const seen: RawRequest[] = [];
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buffered = '';
    let answered = false;
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      if (answered) return;
      buffered += chunk;
      const end = buffered.indexOf('\r\n\r\n');
      if (end < 0) return;
      const [requestLine, ...lines] = buffered.slice(0, end).split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const length = Number(headers['content-length'] ?? 0);
      const body = buffered.slice(end + 4);
      if (body.length < length) return;
      answered = true;
      const [method, path] = requestLine.split(' ');
      const request = { method, path, headers, body };
      if (path === '/v1/models')
        return writeJson(socket, 200, { object: 'list', data: [{ id: 'm', object: 'model' }] });
      if (PROBES.has(path)) return writeJson(socket, 404, { error: 'not found' });
      seen.push(request);
      handle(socket, request);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no address');
  return { url: `http://127.0.0.1:${address.port}`, port: address.port, seen };
}
