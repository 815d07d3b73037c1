/** prom-client registry fed by fleet and proxy events. (Filled in by the observability work.) */
import type { HostPort } from '../config/types.js';
import type { FleetRegistry } from '../fleet/registry.js';
import type { ProxyEventBus } from '../proxy/request-record.js';
import type { WaitQueue } from '../routing/wait-queue.js';
import { Registry, collectDefaultMetrics } from 'prom-client';

export class GatewayMetrics {
  readonly registry = new Registry();

  constructor(_fleet: FleetRegistry, _events: ProxyEventBus, _queue: WaitQueue) {
    collectDefaultMetrics({ register: this.registry });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }

  async listen(_address: HostPort): Promise<void> {}

  async close(): Promise<void> {}
}
