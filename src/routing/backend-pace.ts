/**
 * Measures each backend's pace (milliseconds per generated token) from the answers it gives, for the
 * least-loaded policy. A backend that is slower, or queues requests because its KV cache is full,
 * answers at a slower pace and gets fewer new requests until it catches up.
 */
import type { FleetRegistry } from '../fleet/registry.js';
import type { ProxyEventBus } from '../proxy/request-record.js';

/** Weight of the newest answer in the moving average: about the last 20 answers count. */
const SMOOTHING = 0.05;

/** The moving average after one more answer's milliseconds per token. */
export function nextPace(pace: number | null, sample: number): number {
  return pace === null ? sample : pace + SMOOTHING * (sample - pace);
}

export function trackBackendPace(registry: FleetRegistry, events: ProxyEventBus): void {
  events.on('request', (record) => {
    if (record.outcome !== 'ok' || record.backend === null || !record.completionTokens) return;
    const backend = registry.get(record.backend);
    if (!backend) return;
    backend.pace = nextPace(backend.pace, record.durationMs / record.completionTokens);
  });
  // A restarted backend is a new process: forget how the old one ran.
  registry.on('transition', ({ backend, to }) => {
    if (to !== 'ready') backend.pace = null;
  });
}
