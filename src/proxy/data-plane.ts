/**
 * The data plane: every request that is not for fleetgate's own endpoints goes from node's HTTP
 * server to the attempt loop (forward.ts) without fastify's router, hooks, request and reply
 * objects, child logger and body parser, which cost several per cent of a small proxied request's
 * CPU (bench:overhead (a)); as in Envoy, the admin endpoints are served apart from the traffic.
 * Before a request goes upstream this does what a proxy owes it: absolute-form targets (an open
 * proxy's) and unknown API keys are refused, and the body is read whole, up to
 * `limits.body_size`, so that it can be re-sent to another backend.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Config } from '../config/types.js';
import { hasValidKey, keyDigest } from '../http/bearer-keys.js';
import { answerError, answerInternalError } from '../http/openai-error.js';

/** fleetgate's own endpoints (probes, scrapes, status page, admin API, the fleet's model list): served by fastify. */
export const OWN_PATHS = /^\/(livez|readyz|health|metrics|fleet)(\/|\?|$)|^\/v1\/models\/?(\?|$)/;

export type Forward = (req: IncomingMessage, res: ServerResponse, body: Buffer | null) => void;

export interface DataPlaneOptions {
  /** The running config, read per request: a reload that changes `auth.api_keys` applies at once. */
  config: () => Config;
  forward: Forward;
  /** True once shutdown began: new requests are refused and their connection closed. */
  closing: () => boolean;
  logger: Logger;
}

export function createDataPlane(opts: DataPlaneOptions): (req: IncomingMessage, res: ServerResponse) => void {
  let keySource: readonly string[] | null = null;
  let keys: Buffer[] = [];
  const currentKeys = (config: Config) => {
    if (config.auth.api_keys !== keySource) {
      keySource = config.auth.api_keys;
      keys = keySource.map(keyDigest);
    }
    return keys;
  };

  // Thrown from node's 'request' or a body 'end' listener, a bug would be an uncaught exception.
  const forward = (req: IncomingMessage, res: ServerResponse, body: Buffer | null) => {
    try {
      opts.forward(req, res, body);
    } catch (error) {
      answerInternalError(opts.logger, error, req, res);
    }
  };

  return function handle(req, res) {
    const config = opts.config();
    if ((req.url ?? '').charCodeAt(0) !== 47 /* / */) {
      const message = 'absolute-form request targets are not accepted: fleetgate is not an open proxy';
      answerError(res, 400, message, 'invalid_request_error', { close: true });
      return;
    }
    const required = currentKeys(config);
    if (required.length > 0 && !hasValidKey(req.headers.authorization, required)) {
      const message = 'missing or invalid API key (Authorization: Bearer <key>)';
      answerError(res, 401, message, 'authentication_error');
      return;
    }
    if (opts.closing()) {
      answerError(res, 503, 'fleetgate is shutting down', 'fleet_unavailable', { close: true });
      return;
    }
    if (req.method === 'GET' || req.method === 'HEAD') {
      forward(req, res, null);
      return;
    }
    readBody(req, res, config.limits.body_size, (body) => forward(req, res, body));
  };
}

/** Buffers the request body, or answers 413 once it is larger than `limit` bytes. */
function readBody(req: IncomingMessage, res: ServerResponse, limit: number, done: (body: Buffer | null) => void): void {
  const tooLarge = () => {
    const message = `request body too large: more than limits.body_size (${limit} bytes)`;
    answerError(res, 413, message, 'invalid_request_error', { close: true });
  };
  const declared = Number(req.headers['content-length']);
  if (declared > limit) {
    tooLarge();
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  const onData = (chunk: Buffer) => {
    size += chunk.length;
    if (size > limit) {
      req.off('data', onData);
      req.off('end', onEnd);
      tooLarge();
      return;
    }
    chunks.push(chunk);
  };
  const onEnd = () => {
    if (size === 0) done(null);
    else done(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
  };
  // A client that leaves mid-body gets no answer; the error must not be unhandled.
  req.on('error', () => {});
  req.on('data', onData);
  req.on('end', onEnd);
}
