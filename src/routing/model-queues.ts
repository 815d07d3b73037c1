/**
 * One wait queue per model pool, plus one for a single-model fleet's requests (any ready backend).
 * Each model's requests wait only for that model's backends, with their own policy instance (a
 * round-robin cursor shared across models gives each model's backends uneven shares:
 * vllm-project/production-stack#915), so one model's flood never holds up another's.
 */
import type { Backend } from '../fleet/registry.js';
import type { AdmissionFailure, WaitQueue } from './wait-queue.js';

/** Builds a queue over the ready backends `ready()` returns. */
export type QueueFactory = (ready: () => readonly Backend[]) => WaitQueue;

export class ModelQueues {
  readonly #make: QueueFactory;
  readonly #serving: (model: string) => readonly Backend[];
  readonly #byModel = new Map<string, WaitQueue>();
  readonly any: WaitQueue;

  constructor(opts: {
    make: QueueFactory;
    ready: () => readonly Backend[];
    serving: (model: string) => readonly Backend[];
  }) {
    this.#make = opts.make;
    this.#serving = opts.serving;
    this.any = opts.make(opts.ready);
  }

  /** The queue of one model pool (null: any ready backend). */
  of(model: string | null): WaitQueue {
    if (model === null) return this.any;
    let queue = this.#byModel.get(model);
    if (!queue) {
      queue = this.#make(() => this.#serving(model));
      this.#byModel.set(model, queue);
    }
    return queue;
  }

  /** Waiting requests per model pool; those of the single-model queue (any backend) under null. */
  waitingByModel(): Map<string | null, number> {
    const waiting = new Map<string | null, number>([[null, this.any.waiting]]);
    for (const [model, queue] of this.#byModel) waiting.set(model, queue.waiting);
    return waiting;
  }

  get waiting(): number {
    let total = this.any.waiting;
    for (const queue of this.#byModel.values()) total += queue.waiting;
    return total;
  }

  get rejected(): Readonly<Record<AdmissionFailure, number>> {
    const total = { ...this.any.rejected };
    for (const queue of this.#byModel.values()) {
      for (const reason of Object.keys(total) as AdmissionFailure[]) total[reason] += queue.rejected[reason];
    }
    return total;
  }

  /** Capacity may have appeared somewhere (a backend turned ready, a slot or cap opened). */
  drain(): void {
    this.any.drain();
    for (const queue of this.#byModel.values()) queue.drain();
  }

  close(): void {
    this.any.close();
    for (const queue of this.#byModel.values()) queue.close();
  }
}
