/**
 * Every error fleetgate answers, in the OpenAI shape SGLang and OpenAI clients already parse:
 * `{"error": {"message", "type", "code"}}`. The proxy, the admin API, fleetgate's own endpoints and
 * the server's socket-level refusals all answer through here.
 */
import type { FastifyReply } from 'fastify';

export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'model_not_found'
  | 'conflict_error'
  | 'rate_limit_exceeded'
  | 'fleet_unavailable'
  | 'upstream_error'
  | 'upstream_timeout'
  | 'internal_error';

/** The type a status gets when nothing more specific is known; a backend's 504 is a timeout, any other 502 an error. */
export function errorTypeFor(status: number): ErrorType {
  switch (status) {
    case 401:
      return 'authentication_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 409:
      return 'conflict_error';
    case 429:
      return 'rate_limit_exceeded';
    case 502:
      return 'upstream_error';
    case 503:
      return 'fleet_unavailable';
    case 504:
      return 'upstream_timeout';
    default:
      return status >= 500 ? 'internal_error' : 'invalid_request_error';
  }
}

export function errorBody(message: string, type: ErrorType, status: number): string {
  return JSON.stringify({ error: { message, type, code: status } });
}

/** On a fastify reply (fleetgate's own endpoints). */
export function sendError(
  reply: FastifyReply,
  status: number,
  message: string,
  type: ErrorType = errorTypeFor(status),
) {
  return reply
    .code(status)
    .type('application/json; charset=utf-8')
    .send(errorBody(message, type, status));
}
