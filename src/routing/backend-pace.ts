/**
 * Measures each backend's pace (milliseconds per generated token) from the answers it gives, for the
 * least-loaded policy. A backend that is slower, or queues requests because its KV cache is full,
 * answers at a slower pace and gets fewer new requests until it catches up.
 */
import type { FleetRegistry } from '../fleet/registry.js';
import type { ProxyEventBus } from '../proxy/request-record.js';

/** Weight of the newest answer in the moving average: about the last 20 answers count. */
const SMOOTHING = 0.05;

export function trackBackendPace(registry: FleetRegistry, events: ProxyEventBus): void {
  events.on('request', (record) => {
    if (record.outcome !== 'ok' || record.backend === null || !record.completionTokens) return;
    const backend = registry.get(record.backend);
    if (!backend) return;
    const sample = record.durationMs / record.completionTokens;
    backend.pace = backend.pace === null ? sample : backend.pace + SMOOTHING * (sample - backend.pace);
  });
  // A restarted backend is a new process: forget how the old one ran.
  registry.on('transition', ({ backend, to }) => {
    if (to !== 'ready') backend.pace = null;
  });
}
