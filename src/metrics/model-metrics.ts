/**
 * Per-model series, for fleets serving several models. `fleetgate_backend_model_info` maps each
 * backend to the model it serves, so any per-backend series can be summed by model in PromQL
 * (`sum by (model) (rate(fleetgate_requests_total[5m]) * on (backend) group_left (model)
 * fleetgate_backend_model_info)`), Prometheus's info-metric pattern.
 */
import { Gauge, type Registry } from 'prom-client';
import type { Backend, FleetRegistry } from '../fleet/registry.js';

export interface ModelQueueCounts {
  /** Under null: requests of a single-model fleet, which wait for any backend. */
  waitingByModel(): Map<string | null, number>;
}

export class ModelMetrics {
  readonly #fleet: FleetRegistry;
  readonly #info: Gauge<'backend' | 'model'>;
  /** The model each backend's info series was set for. */
  readonly #infoOf = new Map<string, string>();

  constructor(registry: Registry, fleet: FleetRegistry, queues: ModelQueueCounts | null) {
    this.#fleet = fleet;
    const registers = [registry];
    this.#info = new Gauge({
      name: 'fleetgate_backend_model_info',
      help: 'Always 1: the model the backend serves (the name it answers to), read by its readiness probe.',
      labelNames: ['backend', 'model'] as const,
      registers,
    });
    const ready = new Gauge({
      name: 'fleetgate_model_ready_backends',
      help: 'Ready backends per model, for every model a registered backend was seen serving (0: none ready).',
      labelNames: ['model'] as const,
      registers,
      collect: () => {
        ready.reset();
        for (const model of fleet.models().keys()) ready.set({ model }, fleet.readyServing(model).length);
      },
    });
    const waiting = new Gauge({
      name: 'fleetgate_model_queue_waiting_requests',
      help: 'Requests waiting in fleetgate for a backend of the model they name (fleets serving several models).',
      labelNames: ['model'] as const,
      registers,
      collect: () => {
        waiting.reset();
        const byModel = queues?.waitingByModel() ?? new Map<string | null, number>();
        const models = [...fleet.models().keys()];
        const anyBackend = models.length === 1 ? (byModel.get(null) ?? 0) : 0;
        for (const model of models) waiting.set({ model }, (byModel.get(model) ?? 0) + anyBackend);
      },
    });
    for (const backend of fleet.list()) this.#onModels(backend);
    fleet.on('models', this.#onModels);
    fleet.on('removed', this.#onRemoved);
  }

  close(): void {
    this.#fleet.off('models', this.#onModels);
    this.#fleet.off('removed', this.#onRemoved);
  }

  readonly #onModels = (backend: Backend): void => {
    this.#onRemoved(backend);
    if (backend.model === null) return;
    this.#info.set({ backend: backend.name, model: backend.model }, 1);
    this.#infoOf.set(backend.name, backend.model);
  };

  readonly #onRemoved = (backend: Backend): void => {
    const model = this.#infoOf.get(backend.name);
    if (model === undefined) return;
    this.#info.remove({ backend: backend.name, model });
    this.#infoOf.delete(backend.name);
  };
}
