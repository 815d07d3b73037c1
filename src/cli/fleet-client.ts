/** How `fleetgate status` and `fleetgate wait` find and read a running fleetgate's `GET /fleet/status`. */
import type { FleetStatus } from '../admin/fleet-summary.js';

export const DEFAULT_URL = 'http://127.0.0.1:8080';

/** A usage problem with `--url` / `FLEETGATE_URL` (exit 2). */
export class UrlError extends Error {}

/** The fleetgate base URL from `--url`, else `FLEETGATE_URL`, else the default; `host:port` gets `http://`. */
export function resolveBaseUrl(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): URL {
  const fromEnv = env.FLEETGATE_URL;
  const source = flag !== undefined ? '--url' : fromEnv ? 'FLEETGATE_URL' : null;
  const raw = flag ?? (fromEnv || DEFAULT_URL);
  let url: URL;
  try {
    url = new URL(raw.includes('://') ? raw : `http://${raw}`);
  } catch {
    throw new UrlError(`${source} must be a URL such as ${DEFAULT_URL}, got '${raw}'`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UrlError(`${source} must be an http:// or https:// URL, got '${raw}'`);
  }
  // fleetgate may sit under a path prefix behind another proxy: keep it, as a directory.
  if (!url.pathname.endsWith('/')) url.pathname += '/';
  url.search = '';
  url.hash = '';
  return url;
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

function looksLikeStatus(body: unknown): body is FleetStatus {
  const b = body as FleetStatus | null;
  return typeof b === 'object' && b !== null && Array.isArray(b.backends) && typeof b.ready === 'number';
}

export async function fetchStatus(base: URL, timeoutMs: number): Promise<FleetStatus> {
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
  return body;
}
