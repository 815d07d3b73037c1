/**
 * Who may change the fleet. With `admin.token` set, a mutation needs `Authorization: Bearer
 * <token>`: missing or wrong, the answer is 401 (RFC 6750: credentials would help). Without a token,
 * mutations are accepted only from loopback, 403 from anywhere else (no credentials can help).
 *
 * The address is the TCP peer's, never `X-Forwarded-For`: a header is what a caller says it is.
 * SIGHUP reloads in process (`Gateway.reload`), not through this route, so no caller is exempt.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { hasValidKey, keyDigest } from '../http/bearer-keys.js';
import { sendError } from '../http/openai-error.js';

/** 127.0.0.0/8, ::1, and IPv4 loopback mapped into IPv6 (`::ffff:127.0.0.1`, a dual-stack listener). */
export function isLoopback(address: string | undefined): boolean {
  if (address === undefined) return false;
  const v4 = address.startsWith('::ffff:') ? address.slice('::ffff:'.length) : address;
  if (/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4)) return true;
  return address === '::1' || address === '0:0:0:0:0:0:0:1';
}

/** The TCP peer address (`X-Forwarded-For` is ignored). */
export function peerAddress(request: FastifyRequest): string | undefined {
  return request.raw.socket?.remoteAddress;
}

export type AdminDecision = { ok: true } | { ok: false; status: 401 | 403; message: string };

function authorizeAdmin(request: FastifyRequest, token: string | null): AdminDecision {
  if (token !== null) {
    if (hasValidKey(request.headers.authorization, [keyDigest(token)])) return { ok: true };
    const given = request.headers.authorization !== undefined;
    return {
      ok: false,
      status: 401,
      message: given ? 'invalid admin token' : 'admin token required (Authorization: Bearer <admin.token>)',
    };
  }
  if (isLoopback(peerAddress(request))) return { ok: true };
  return {
    ok: false,
    status: 403,
    message: 'admin calls are accepted only from loopback when admin.token is not set',
  };
}

/** An `onRequest` hook that refuses unauthorised mutations; `token` is read per call, so a reload applies. */
export function requireAdmin(token: () => string | null) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const decision = authorizeAdmin(request, token());
    if (decision.ok) return;
    request.log.warn(
      { admin: { from: peerAddress(request), method: request.method, url: request.url, status: decision.status } },
      `admin: refused ${request.method} ${request.url}: ${decision.message}`,
    );
    if (decision.status === 401) reply.header('www-authenticate', 'Bearer realm="fleetgate admin"');
    return sendError(reply, decision.status, decision.message);
  };
}
