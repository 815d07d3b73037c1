/** Reads `GET /fleet/status` of the fleetgate a batch runs through (for auto concurrency and progress). */
import { request } from 'undici';
import type { FleetView } from './auto-concurrency.js';

export function fleetViewReader(base: URL, timeoutMs = 5000): () => Promise<FleetView> {
  const url = new URL('fleet/status', base);
  return async () => {
    const res = await request(url, { headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
    const body = (await res.body.json()) as FleetView;
    if (res.statusCode !== 200 || !Array.isArray(body?.backends)) {
      throw new Error(`${url} answered HTTP ${res.statusCode} without a fleet status: is this fleetgate?`);
    }
    return body;
  };
}
