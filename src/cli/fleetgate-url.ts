/**
 * Which fleetgate the command line talks to (`status`, `wait`, `batch`, the admin verbs): `--url`,
 * else `FLEETGATE_URL`, else the default. Reading its status is http/fleet-status-client.ts's.
 */

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
