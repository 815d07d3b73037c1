/**
 * A wait queue over a registry's ready backends, counting its leases there and drained by the
 * registry's events, as routing/fleet-routing.ts wires it in fleetgate: the queue does not drain
 * itself when a lease ends, so one built without this wiring would never hand a freed slot on.
 */
import type { FleetRegistry } from '../../src/fleet/registry.js';
import { drainOnCapacity } from '../../src/routing/queue/registry-wiring.js';
import { WaitQueue, type WaitQueueOptions } from '../../src/routing/queue/wait-queue.js';

export function queueOn(
  registry: FleetRegistry,
  opts: Omit<WaitQueueOptions, 'ready' | 'slots'> & Partial<Pick<WaitQueueOptions, 'ready'>>,
): WaitQueue {
  const queue = new WaitQueue({ ready: () => registry.ready, ...opts, slots: registry });
  drainOnCapacity(registry, queue);
  return queue;
}
