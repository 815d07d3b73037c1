/** Raw HTTP/1.1 over TCP, for requests no HTTP client library would send (absolute-form, CONNECT, slowloris). */
import { connect, type Socket } from 'node:net';

export interface RawExchange {
  /** Everything the server wrote. */
  data: string;
  /** The server closed the connection (rather than the timeout expiring). */
  closedByServer: boolean;
  ms: number;
}

/** Writes `bytes`, then collects the answer until the server closes or `timeoutMs` passes. */
export function rawExchange(port: number, bytes: string, timeoutMs = 2_000): Promise<RawExchange> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket = connect(port, '127.0.0.1', () => socket.write(bytes));
    let data = '';
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      socket.destroy();
    }, timeoutMs);
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      data += chunk;
    });
    socket.on('error', (error) => {
      if (data === '' && !timedOut && (error as NodeJS.ErrnoException).code !== 'ECONNRESET') reject(error);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ data, closedByServer: !timedOut, ms: performance.now() - started });
    });
  });
}

/** An open connection that has not finished its request yet. */
export function openSocket(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.on('error', reject);
  });
}
