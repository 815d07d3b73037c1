/**
 * `fleetgate_upstream_connections{backend}`: sockets open to each backend, read from the upstream
 * pools when scraped. With prom-client's default process metrics (RSS, heap, open fds, active
 * handles, event-loop delay p99) it is what a long run (bench/soak) samples to show nothing leaks.
 */
import { Gauge, type Registry } from 'prom-client';
import type { FleetRegistry } from '../fleet/registry.js';

export function registerUpstreamConnections(
  register: Registry,
  fleet: FleetRegistry,
  connections: () => Map<string, number>,
): void {
  const gauge: Gauge<'backend'> = new Gauge({
    name: 'fleetgate_upstream_connections',
    help: 'Sockets open from fleetgate to the backend (its keep-alive pool).',
    labelNames: ['backend'] as const,
    registers: [register],
    collect() {
      gauge.reset();
      const byUrl = connections();
      for (const backend of fleet.list()) gauge.set({ backend: backend.name }, byUrl.get(backend.url) ?? 0);
    },
  });
}
