/**
 * The one wiring from the fleet registry to the wait queues: wherever capacity may have appeared (a
 * backend turned ready, a cap opened, a request ended, a pool's model became known, a load report
 * showed that other replicas' requests ended: the fleet-wide cap), the waiters are tried again.
 * This is the only drain: a released lease tells the registry (`release`), whose `capacity` event
 * lands here, so each request end drains every queue once (a queue does not drain itself).
 */
import type { FleetRegistry } from '../../fleet/registry.js';

export function drainOnCapacity(registry: FleetRegistry, queues: { drain(): void }): void {
  registry.on('transition', ({ to }) => {
    if (to === 'ready') queues.drain();
  });
  registry.on('capacity', () => queues.drain());
  registry.on('models', () => queues.drain());
  registry.on('load', () => queues.drain());
}
