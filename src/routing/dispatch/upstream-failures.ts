/**
 * One catalogue from upstream failure to what fleetgate does about it: the client's status, the
 * `kind` label of `fleetgate_upstream_errors_total`, the outcome the registry hears, and whether a
 * request may be re-sent to another backend (only while nothing reached the client).
 */
import type { TrafficOutcome } from '../../fleet/backend-lifecycle.js';

export interface UpstreamFailure {
  kind: string;
  /** What the registry hears; null when the fleet itself gave up on the backend (nothing to report). */
  outcome: TrafficOutcome | null;
  status: 502 | 504;
  /** Safe to re-send elsewhere if no response byte reached the client. */
  retryable: boolean;
  message: string;
}

interface CatalogueEntry {
  kind: string;
  outcome: TrafficOutcome | null;
  status: 502 | 504;
  retryable: boolean;
}

const CATALOGUE: Record<string, CatalogueEntry> = {
  ECONNREFUSED: { kind: 'connect_refused', outcome: 'connect_refused', status: 502, retryable: true },
  EHOSTUNREACH: { kind: 'connect_refused', outcome: 'connect_refused', status: 502, retryable: true },
  ENETUNREACH: { kind: 'connect_refused', outcome: 'connect_refused', status: 502, retryable: true },
  ENOTFOUND: { kind: 'connect_refused', outcome: 'connect_refused', status: 502, retryable: true },
  UND_ERR_CONNECT_TIMEOUT: { kind: 'connect_timeout', outcome: 'timeout', status: 504, retryable: true },
  // The backend closed the connection before any response: it crashed or restarted after receiving
  // the request. Nothing reached the client, so re-sending cannot duplicate an answer.
  ECONNRESET: { kind: 'reset', outcome: 'reset', status: 502, retryable: true },
  EPIPE: { kind: 'reset', outcome: 'reset', status: 502, retryable: true },
  UND_ERR_SOCKET: { kind: 'reset', outcome: 'reset', status: 502, retryable: true },
  UND_ERR_CLOSED: { kind: 'reset', outcome: 'reset', status: 502, retryable: true },
  // A long non-streamed generation may still be running on the backend: re-sending would double
  // the GPU work, so a timeout is reported, not retried.
  UND_ERR_HEADERS_TIMEOUT: { kind: 'headers_timeout', outcome: 'timeout', status: 504, retryable: false },
  UND_ERR_BODY_TIMEOUT: { kind: 'stream_idle_timeout', outcome: 'timeout', status: 504, retryable: false },
  UND_ERR_RES_CONTENT_LENGTH_MISMATCH: { kind: 'bad_response', outcome: 'http_5xx', status: 502, retryable: false },
  UND_ERR_RES_EXCEEDED_MAX_SIZE: { kind: 'bad_response', outcome: 'http_5xx', status: 502, retryable: false },
  UND_ERR_INFO: { kind: 'bad_response', outcome: 'http_5xx', status: 502, retryable: false },
  FLEETGATE_HTML_ANSWER: { kind: 'bad_response', outcome: 'http_5xx', status: 502, retryable: false },
  // The progress watchdog ended the attempt; it already told the registry what it saw.
  FLEETGATE_NO_PROGRESS: { kind: 'no_progress', outcome: null, status: 502, retryable: true },
  // The backend was drained past its deadline (fleet/drain-deadline.ts): nothing is wrong with it.
  // Re-sent while nothing reached the client: its generation on the drained backend is given up anyway.
  FLEETGATE_DRAIN_DEADLINE: { kind: 'drain_deadline', outcome: null, status: 502, retryable: true },
};

/** The progress watchdog gave up on an attempt; `message` is its reason. */
export class NoProgressError extends Error {
  override name = 'NoProgressError';
  readonly code = 'FLEETGATE_NO_PROGRESS';
}

/** The attempt's backend was drained past its deadline; `message` says so. */
export class DrainDeadlineError extends Error {
  override name = 'DrainDeadlineError';
  readonly code = 'FLEETGATE_DRAIN_DEADLINE';
}

const BAD_RESPONSE: CatalogueEntry = { kind: 'bad_response', outcome: 'http_5xx', status: 502, retryable: false };
const OTHER: CatalogueEntry = { kind: 'other', outcome: 'http_5xx', status: 502, retryable: false };

/** Classifies an error from undici, or one that carries it as its `cause`. */
export function classifyUpstreamError(error: unknown): UpstreamFailure {
  for (let current = error, depth = 0; current != null && depth < 5; depth++) {
    const code = (current as { code?: unknown }).code;
    // undici's HTTPParserError carries no string code: a status line or headers the parser refused.
    if ((current as { name?: unknown }).name === 'HTTPParserError')
      return { ...BAD_RESPONSE, message: describe('bad_response', current) };
    if (typeof code === 'string') {
      const entry = CATALOGUE[code] ?? (code.startsWith('HPE_') ? BAD_RESPONSE : undefined);
      if (entry) return { ...entry, message: describe(entry.kind, current) };
    }
    current = (current as { cause?: unknown }).cause;
  }
  return { ...OTHER, message: describe(OTHER.kind, error) };
}

function describe(kind: string, error: unknown): string {
  const detail = error instanceof Error ? error.message : String(error);
  switch (kind) {
    case 'connect_refused':
      return `backend refused the connection (${detail})`;
    case 'connect_timeout':
      return 'backend did not accept the connection in time';
    case 'reset':
      return `backend closed the connection (${detail})`;
    case 'headers_timeout':
      return 'backend sent no response in time';
    case 'stream_idle_timeout':
      return 'backend stopped sending data mid-response';
    case 'bad_response':
      return `backend sent a malformed response (${detail})`;
    case 'no_progress':
    case 'drain_deadline':
      return detail;
    default:
      return `upstream error (${detail})`;
  }
}
