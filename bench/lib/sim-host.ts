/**
 * A process of simulated SGLang servers for the benches, with a tiny control port:
 *   GET /stats            [{name, port, status, counters}] per server
 *   POST /go              starts the servers marked `lateMs` that much later
 *   POST /crash?i=N       server N crashes now (port closed, connections dropped; relaunch per restartAfterMs)
 *   POST /scheduler-dead?i=N  server N's scheduler dies now; HTTP stays up, requests hang
 *   POST /quit            stops every server and exits
 * Run as `node --import tsx bench/lib/sim-host.ts '<SimHostSpec JSON>'`; started by sim-control.ts.
 */
import { createServer } from 'node:http';
import { SimServer } from '../../src/sim/index.js';
import type { SimHostSpec } from './sim-control.js';

const spec = JSON.parse(process.argv[2] ?? '{}') as SimHostSpec;
const servers = spec.servers.map(
  (s) =>
    new SimServer({
      port: s.port,
      name: s.name,
      logFile: null,
      engine: s.engine,
      timing: s.timing,
      restartAfterMs: s.restartAfterMs ?? null,
      version: s.version,
      ...s.model,
    }),
);
servers.forEach((server, i) => {
  if (spec.servers[i].lateMs === undefined) server.start();
});

async function quit(code: number): Promise<never> {
  await Promise.all(servers.map((s) => s.stop()));
  process.exit(code);
}

const control = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://x');
  const reply = (status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };
  if (url.pathname === '/stats') {
    return reply(
      200,
      servers.map((s) => ({ name: s.name, port: s.port, status: s.status, counters: s.counters })),
    );
  }
  if (req.method === 'POST' && url.pathname === '/go') {
    servers.forEach((server, i) => {
      const late = spec.servers[i].lateMs;
      if (late !== undefined) setTimeout(() => server.start(), late);
    });
    return reply(200, { ok: true });
  }
  if (req.method === 'POST' && url.pathname === '/crash') {
    const server = servers[Number(url.searchParams.get('i'))];
    if (!server) return reply(404, { error: 'no such server' });
    void server.crash();
    return reply(200, { ok: true });
  }
  if (req.method === 'POST' && url.pathname === '/scheduler-dead') {
    const server = servers[Number(url.searchParams.get('i'))];
    if (!server) return reply(404, { error: 'no such server' });
    server.killScheduler();
    return reply(200, { ok: true });
  }
  if (req.method === 'POST' && url.pathname === '/quit') {
    reply(200, { ok: true });
    void quit(0);
    return;
  }
  reply(404, { error: 'not found' });
});
control.listen(spec.controlPort, '127.0.0.1');
process.once('SIGTERM', () => void quit(0));
process.once('SIGINT', () => void quit(0));
