/**
 * What crosses fleetgate in each direction. Headers that describe one hop, not the message (RFC 9110
 * 7.6.1), stop here both ways, with every header the `Connection` header names.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';

const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'trailer', 'te'];

/**
 * Not forwarded upstream, beyond the hop-by-hop ones. undici sets `host` (the backend's) itself and
 * refuses `expect` (curl sends `Expect: 100-continue` on large bodies: forwarded, it would fail as an
 * upstream error against a healthy backend). The `x-forwarded-*` pair is re-set below.
 * `content-length` stays: @fastify/reply-from sets it to the buffered body's length.
 */
const NOT_FORWARDED = [...HOP_BY_HOP, 'host', 'expect', 'proxy-authorization', 'x-forwarded-proto'];

export type RequestHeaders = Record<string, string | string[] | number | undefined>;

export interface UpstreamHeaderOptions {
  /** The client's address, appended to `X-Forwarded-For`. */
  peer: string;
  /** Replaces the client's `Authorization` when set. */
  apiKey: string | null;
}

/** Turns the client's headers (node's lower-cased object, a copy) into the upstream request's, in place. */
export function upstreamRequestHeaders(headers: RequestHeaders, opts: UpstreamHeaderOptions): RequestHeaders {
  const out = headers;
  const connection = out.connection;
  if (connection !== undefined) for (const name of namesIn(String(connection))) delete out[name];
  for (const name of NOT_FORWARDED) if (out[name] !== undefined) delete out[name];
  const prior = out['x-forwarded-for'];
  const forwardedFor = Array.isArray(prior) ? prior.join(', ') : prior === undefined ? '' : String(prior).trim();
  out['x-forwarded-for'] = forwardedFor === '' ? opts.peer : `${forwardedFor}, ${opts.peer}`;
  out['x-forwarded-proto'] = 'http';
  if (opts.apiKey !== null) out.authorization = `Bearer ${opts.apiKey}`;
  return out;
}

/** The upstream's response headers for the client, hop-by-hop ones dropped. */
export function clientResponseHeaders(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  // Repeated, undici gives the values as an array; Node joins a list header's values with ', '.
  const connection: unknown = headers.connection;
  const listed = connection === undefined ? null : namesIn(String(connection));
  const out: OutgoingHttpHeaders = {};
  for (const name in headers) {
    if (HOP_BY_HOP.includes(name) || listed?.has(name)) continue;
    out[name] = headers[name];
  }
  return out;
}

/** The header names a `Connection` value lists; the common values `keep-alive` and `close` list none. */
function namesIn(connection: string): Set<string> {
  const names = new Set<string>();
  if (connection === 'keep-alive' || connection === 'close') return names;
  for (const name of connection.split(',')) names.add(name.trim().toLowerCase());
  return names;
}
