/**
 * The one client of a running fleetgate's `GET /fleet/status`: `fleetgate status`, `wait` and
 * `batch` read it to show and wait for the fleet, the Batch API's jobs (batch/) to set their
 * concurrency from it. It lives in http/ because batch/ may import only config, http and tracing;
 * the answer's full type is admin's (`FleetStatus`), so each caller names the view it reads.
 */
import { isObject } from '../config/json-object.js';

/** What every reader of the answer relies on, and all this client checks of it. */
export interface StatusShape {
  readonly ready: number;
  readonly backends: readonly unknown[];
}

/** fleetgate did not answer, or answered something that is not its status. */
export class UnreachableError extends Error {}

/** Short words for the usual network failures, as a person would say them. */
function networkReason(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  const code = cause?.code;
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host not found';
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') return 'connection reset';
  if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError'))
    return 'no answer in time';
  return cause?.message ?? (error instanceof Error ? error.message : String(error));
}

function looksLikeStatus(body: unknown): body is StatusShape {
  return isObject(body) && Array.isArray(body.backends) && typeof body.ready === 'number';
}

/**
 * The status of the fleetgate at `base` (its URL, a directory: `fleet/status` is resolved against
 * it), read as `T`; `UnreachableError` when it does not answer within `timeoutMs` or answers
 * something else.
 */
export async function fetchFleetStatus<T extends StatusShape>(base: URL, timeoutMs = 5000): Promise<T> {
  const url = new URL('fleet/status', base);
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), headers: { accept: 'application/json' } });
  } catch (error) {
    throw new UnreachableError(`cannot reach fleetgate at ${base.origin}${base.pathname}: ${networkReason(error)}`);
  }
  let body: unknown;
  try {
    body = await res.json();
  } catch {
    body = null;
  }
  if (!res.ok || !looksLikeStatus(body)) {
    throw new UnreachableError(`${url} answered HTTP ${res.status} without a fleet status: is this fleetgate?`);
  }
  return body as T;
}
