/**
 * What crosses fleetgate in each direction. Headers that describe one hop, not the message (RFC 9110
 * 7.6.1), stop here both ways, with every header the `Connection` header names.
 */
import type { IncomingHttpHeaders } from 'node:http';

const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'trailer', 'te'];

/**
 * Not forwarded upstream, beyond the hop-by-hop ones. undici sets `host` (the backend's) and
 * `content-length` (of the buffered body) itself, and refuses `expect` (curl sends `Expect:
 * 100-continue` on large bodies: forwarded, it would fail as an upstream error against a healthy
 * backend). The `x-forwarded-*` pair is re-set below.
 */
const NOT_FORWARDED = new Set([
  ...HOP_BY_HOP,
  'host',
  'content-length',
  'expect',
  'proxy-authorization',
  'x-forwarded-for',
  'x-forwarded-proto',
]);
const NOT_RETURNED = new Set(HOP_BY_HOP);

export interface UpstreamHeaderOptions {
  /** The client's address, appended to `X-Forwarded-For`. */
  peer: string;
  /** Replaces the client's `Authorization` when set. */
  apiKey: string | null;
}

/** The client's headers as undici's flat `[name, value, ...]` list for the upstream request. */
export function upstreamRequestHeaders(rawHeaders: readonly string[], opts: UpstreamHeaderOptions): string[] {
  const listed = connectionListed(rawHeaders);
  const out: string[] = [];
  let forwardedFor: string | null = null;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i].toLowerCase();
    if (listed?.has(name)) continue;
    const value = rawHeaders[i + 1];
    if (name === 'x-forwarded-for' && value.trim() !== '')
      forwardedFor = forwardedFor === null ? value : `${forwardedFor}, ${value}`;
    if (NOT_FORWARDED.has(name) || (name === 'authorization' && opts.apiKey !== null)) continue;
    out.push(rawHeaders[i], value);
  }
  out.push('x-forwarded-for', forwardedFor === null ? opts.peer : `${forwardedFor}, ${opts.peer}`);
  out.push('x-forwarded-proto', 'http');
  if (opts.apiKey !== null) out.push('authorization', `Bearer ${opts.apiKey}`);
  return out;
}

/** The upstream's response headers as the flat list `writeHead` takes, hop-by-hop ones dropped. */
export function clientResponseHeaders(headers: IncomingHttpHeaders): string[] {
  const connection: unknown = headers.connection;
  // Repeated, undici gives the values as an array; Node joins a list header's values with ', '.
  const listed = connection === undefined ? null : namesIn(String(connection));
  const out: string[] = [];
  for (const name in headers) {
    if (NOT_RETURNED.has(name) || listed?.has(name)) continue;
    const value = headers[name];
    if (Array.isArray(value)) for (const each of value) out.push(name, each);
    else if (value !== undefined) out.push(name, value);
  }
  return out;
}

function connectionListed(rawHeaders: readonly string[]): Set<string> | null {
  let listed: Set<string> | null = null;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i].length !== 10 || rawHeaders[i].toLowerCase() !== 'connection') continue;
    const names = namesIn(rawHeaders[i + 1]);
    listed = listed === null ? names : new Set([...listed, ...names]);
  }
  return listed;
}

/** The header names a `Connection` value lists; the common values `keep-alive` and `close` list none. */
function namesIn(connection: string): Set<string> {
  const names = new Set<string>();
  if (connection === 'keep-alive' || connection === 'close') return names;
  for (const name of connection.split(',')) names.add(name.trim().toLowerCase());
  return names;
}
