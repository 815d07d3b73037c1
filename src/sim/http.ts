/**
 * The simulated server's HTTP endpoints on raw `node:http` (cheap enough for thousands of streams).
 * What answers when follows the endpoint matrix of ref 1.4: during warm-up only the health
 * endpoints say 503 (new versions); info and generation endpoints already work.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { embeddingsBody } from './embeddings.js';
import { type GenerationHost, JSON_HEADERS, parseGeneration, runGeneration, sendError } from './generation.js';
import { getLoad, type InfoContext, metricsText, modelInfo, modelNotFound, modelsList, serverInfo } from './info.js';
import type { RuntimeLog } from './runtime-log.js';
import type { Timers } from './timers.js';
import type { SimStatus } from './types.js';

export interface HttpHost extends GenerationHost {
  readonly status: SimStatus;
  readonly info: InfoContext;
  readonly apiKey: string | null;
  readonly log: RuntimeLog;
  readonly timers: Timers;
  readonly healthMs: number;
  readonly healthTimeoutMs: number;
  /** Counts the request and emits `request`. */
  received(path: string, method: string): void;
  /** A generation request's parsed body (emitted as `generation` for tests that check what a backend got). */
  generationBody(path: string, body: unknown): void;
  /** Requests the hung server holds forever (until stop). */
  readonly held: Set<ServerResponse>;
  /** `dp_rank_dead`: this generation request goes to the dead rank and gets nothing back. */
  landsOnDeadRank(streamed: boolean): boolean;
}

type Handler = (host: HttpHost, req: IncomingMessage, res: ServerResponse, path: string) => void;

const PLAIN = { server: 'uvicorn' } as const;

function client(req: IncomingMessage): string {
  return `${req.socket.remoteAddress ?? '127.0.0.1'}:${req.socket.remotePort ?? 0}`;
}

function send(
  host: HttpHost,
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  body: string,
  headers: object = JSON_HEADERS,
): void {
  host.log.access(client(req), req.method ?? 'GET', req.url ?? '/', status);
  res.writeHead(status, { ...headers, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function hold(host: HttpHost, res: ServerResponse): void {
  host.held.add(res);
  res.on('close', () => host.held.delete(res));
}

const schedulerGone = (host: HttpHost) => host.status === 'failed';

/** What a health probe answers and when (ref 1.3 for SGLang, ref 6 for vLLM). */
function healthAnswer(host: HttpHost, path: string): { status: number; afterMs: number } {
  const { kind, version } = host.info;
  if (kind === 'vllm') return { status: schedulerGone(host) ? 503 : 200, afterMs: 0 };
  // v0.4 `/health` has no probe at all: 200 whenever HTTP is up.
  if (version === 'old' && path === '/health') return { status: 200, afterMs: 0 };
  if (version === 'new' && host.status === 'warming_up') return { status: 503, afterMs: 0 };
  // The probe generates one token and waits up to SGLANG_HEALTH_CHECK_TIMEOUT for any output.
  if (schedulerGone(host)) return { status: 503, afterMs: host.healthTimeoutMs };
  return { status: 200, afterMs: host.healthMs };
}

function health(host: HttpHost, req: IncomingMessage, res: ServerResponse, path: string): void {
  const { status, afterMs } = healthAnswer(host, path);
  if (afterMs === 0) {
    send(host, req, res, status, '', PLAIN);
    return;
  }
  const tic = Date.now();
  host.timers.set(() => {
    if (res.destroyed) return;
    if (status === 503) host.log.healthFailed(tic, tic - afterMs);
    send(host, req, res, status, '', PLAIN);
  }, afterMs);
}

function notFound(host: HttpHost, req: IncomingMessage, res: ServerResponse): void {
  send(host, req, res, 404, '{"detail":"Not Found"}');
}

function readJson(req: IncomingMessage, done: (body: unknown, error: string | null) => void): void {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const text = Buffer.concat(chunks).toString('utf8');
    if (text.trim() === '') return done(undefined, 'JSON decode error: the request body is empty');
    try {
      done(JSON.parse(text), null);
    } catch (error) {
      done(undefined, `JSON decode error: ${(error as Error).message}`);
    }
  });
}

function generation(api: 'generate' | 'chat' | 'completion'): Handler {
  return (host, req, res) => {
    const type = req.headers['content-type'];
    if (api !== 'generate' && type !== undefined && !type.includes('json')) {
      return sendError(res, "Unsupported Media Type: Only 'application/json' is allowed", 400);
    }
    readJson(req, (body, error) => {
      if (error !== null) {
        host.log.access(client(req), req.method ?? 'POST', req.url ?? '/', 400);
        return sendError(res, error);
      }
      host.generationBody(req.url ?? '/', body);
      const spec = parseGeneration(api, body, host);
      if (typeof spec === 'string') {
        host.log.access(client(req), req.method ?? 'POST', req.url ?? '/', 400);
        return sendError(res, spec);
      }
      if (host.landsOnDeadRank(spec.job.stream)) return hold(host, res);
      runGeneration(host, res, spec, () => host.log.access(client(req), req.method ?? 'POST', req.url ?? '/', 200));
    });
  };
}

const abortRequest: Handler = (host, req, res) => {
  readJson(req, (body) => {
    const b = (body ?? {}) as { rid?: unknown; abort_all?: unknown };
    if (b.abort_all === true) host.engine.abortAll();
    else if (typeof b.rid === 'string') {
      const request = host.active.get(b.rid);
      if (request) host.engine.abort(request);
    }
    send(host, req, res, 200, '', PLAIN);
  });
};

/** `/v1/embeddings`: answered at once (no decode), but like generation it hangs on a dead scheduler. */
const embeddings: Handler = (host, req, res) => {
  readJson(req, (body, error) => {
    const answer = error === null ? embeddingsBody(body, host.model) : { error };
    if (typeof answer !== 'string') {
      host.log.access(client(req), req.method ?? 'POST', req.url ?? '/', 400);
      return sendError(res, answer.error);
    }
    host.generationBody(req.url ?? '/', body);
    if (schedulerGone(host)) return hold(host, res);
    send(host, req, res, 200, answer);
  });
};

/** A scheduler-backed endpoint: it waits forever on a dead scheduler (ref 1.4 "likely hangs"). */
function fromScheduler(build: (host: HttpHost) => string, deprecatedFor?: string): Handler {
  return (host, req, res, path) => {
    if (deprecatedFor && host.info.version === 'new') host.log.deprecated(path, deprecatedFor);
    if (schedulerGone(host)) return hold(host, res);
    send(host, req, res, 200, build(host));
  };
}

function sglangRoutes(version: 'new' | 'old'): Map<string, [string, Handler]> {
  const info: Handler = (host, req, res, path) => {
    if (path === '/get_model_info' && version === 'new') host.log.deprecated(path, '/model_info');
    send(host, req, res, 200, modelInfo(host.info));
  };
  const serverInfoHandler = fromScheduler(
    (host) => serverInfo(host.info, host.engine.stats),
    version === 'new' ? '/server_info' : undefined,
  );
  const routes = new Map<string, [string, Handler]>([
    ['/health', ['GET', health]],
    ['/health_generate', ['GET', health]],
    ['/ping', ['GET', (host, req, res) => send(host, req, res, 200, '', PLAIN)]],
    ['/get_model_info', ['GET', info]],
    ['/get_server_info', ['GET', serverInfoHandler]],
    [
      '/get_load',
      [
        'GET',
        fromScheduler((host) => getLoad(host.info, host.engine.stats), version === 'new' ? '/v1/loads' : undefined),
      ],
    ],
    ['/generate', ['POST', generation('generate')]],
    ['/abort_request', ['POST', abortRequest]],
  ]);
  if (version === 'new') {
    routes.set('/model_info', ['GET', info]);
    routes.set('/server_info', ['GET', fromScheduler((host) => serverInfo(host.info, host.engine.stats))]);
  }
  return routes;
}

const COMMON: [string, [string, Handler]][] = [
  ['/v1/models', ['GET', (host, req, res) => send(host, req, res, 200, modelsList(host.info))]],
  ['/v1/completions', ['POST', generation('completion')]],
  ['/v1/chat/completions', ['POST', generation('chat')]],
  ['/v1/embeddings', ['POST', embeddings]],
  [
    '/metrics',
    [
      'GET',
      (host, req, res) => {
        if (!host.info.enableMetrics && host.info.kind === 'sglang') return notFound(host, req, res);
        send(host, req, res, 200, metricsText(host.info, host.engine.stats), {
          'content-type': 'text/plain; version=0.0.4; charset=utf-8',
          server: 'uvicorn',
        });
      },
    ],
  ],
];

const VLLM_ROUTES = new Map<string, [string, Handler]>([
  ['/health', ['GET', health]],
  ['/ping', ['GET', health]],
  ...COMMON,
]);

/** The request handler for one server; routes are built once per kind and version. */
export function createHandler(host: HttpHost): (req: IncomingMessage, res: ServerResponse) => void {
  const routes = host.info.kind === 'vllm' ? VLLM_ROUTES : new Map([...sglangRoutes(host.info.version), ...COMMON]);
  return (req, res) => {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const method = req.method ?? 'GET';
    host.received(path, method);
    if (host.status === 'hung') return hold(host, res);
    if (host.apiKey !== null && !path.startsWith('/health') && !path.startsWith('/metrics')) {
      if (req.headers.authorization !== `Bearer ${host.apiKey}`)
        return send(host, req, res, 401, '{"error":"Unauthorized"}');
    }
    const route = routes.get(path);
    if (route === undefined) {
      if (path.startsWith('/v1/models/') && method === 'GET') {
        const name = decodeURIComponent(path.slice('/v1/models/'.length));
        return name === host.info.model
          ? send(host, req, res, 200, JSON.stringify(JSON.parse(modelsList(host.info)).data[0]))
          : send(host, req, res, 404, modelNotFound(name));
      }
      return notFound(host, req, res);
    }
    const [allowed, handler] = route;
    const ok =
      method === allowed || (allowed === 'GET' && method === 'HEAD') || (path === '/generate' && method === 'PUT');
    if (!ok) return send(host, req, res, 405, '{"detail":"Method Not Allowed"}');
    handler(host, req, res, path);
  };
}
