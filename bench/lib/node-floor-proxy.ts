/**
 * The floor for a proxy written in Node: `node:http` server in front, one undici Pool per backend
 * behind, round-robin, the body passed through `dispatch` with a bare handler (no fastify, no
 * reply-from, no Readable per response, no metrics, no health checks). Not a product: the
 * `node-floor` target of bench:overhead, to tell what part of fleetgate's cost is Node's own.
 * Usage: node --import tsx bench/lib/node-floor-proxy.ts PORT BACKEND_URL...
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Pool } from 'undici';

const [portText, ...backends] = process.argv.slice(2);
const pools = backends.map((url) => new Pool(url, { keepAliveTimeout: 60_000 }));
let next = 0;

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'trailer', 'te']);

function forward(req: IncomingMessage, res: ServerResponse, body: Buffer | null): void {
  const pool = pools[next];
  next = (next + 1) % pools.length;
  const headers: string[] = [];
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    if (!HOP_BY_HOP.has(raw[i].toLowerCase())) headers.push(raw[i], raw[i + 1]);
  }
  let abort: ((error: Error) => void) | null = null;
  res.once('close', () => {
    if (!res.writableFinished) abort?.(new Error('client gone'));
  });
  pool.dispatch({ path: req.url ?? '/', method: req.method as 'POST', headers, body }, {
    onConnect(fn: (error: Error) => void) {
      abort = fn;
    },
    onHeaders(status: number, rawHeaders: Buffer[], resume: () => void) {
      const out: string[] = [];
      for (let i = 0; i < rawHeaders.length; i += 2) {
        const name = rawHeaders[i].toString('latin1');
        if (!HOP_BY_HOP.has(name.toLowerCase())) out.push(name, rawHeaders[i + 1].toString('latin1'));
      }
      res.writeHead(status, out);
      res.on('drain', resume);
      return true;
    },
    onData(chunk: Buffer) {
      return res.write(chunk);
    },
    onComplete() {
      res.end();
    },
    onError() {
      if (!res.headersSent) {
        res.writeHead(502, { 'content-type': 'application/json' });
        res.end('{"error":"upstream"}');
      } else {
        res.destroy();
      }
    },
  } as never);
}

const server = createServer((req, res) => {
  if (req.method === 'GET' || req.method === 'HEAD') return forward(req, res, null);
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => forward(req, res, Buffer.concat(chunks)));
});
server.keepAliveTimeout = 75_000;
server.listen(Number(portText), '127.0.0.1');
process.once('SIGTERM', () => process.exit(0));
