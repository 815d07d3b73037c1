/**
 * One wait queue per model pool, plus one for a single-model fleet's requests (any ready backend).
 * Each model's requests wait only for that model's backends, with their own policy instance (a
 * round-robin cursor shared across models gives each model's backends uneven shares:
 * vllm-project/production-stack#915), so one model's flood never holds up another's.
 */
import type { Backend } from '../../fleet/registry.js';
import { ADMISSION_FAILURES, type AdmissionFailure, type WaitObserver, type WaitQueue } from './wait-queue.js';

/** Builds a queue over the ready backends `ready()` returns. */
export type QueueFactory = (ready: () => readonly Backend[]) => WaitQueue;

export class ModelQueues {
  readonly #make: QueueFactory;
  readonly #serving: (model: string) => readonly Backend[];
  readonly #byModel = new Map<string, WaitQueue>();
  readonly #observers: WaitObserver[] = [];
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
      for (const observer of this.#observers) queue.observeWaits(observer);
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

  get #all(): WaitQueue[] {
    return [this.any, ...this.#byModel.values()];
  }

  // Every queue has the same priority classes; the figures below add up over the models.

  get classNames(): string[] {
    return this.any.classNames;
  }

  get waiting(): number {
    return this.#all.reduce((total, queue) => total + queue.waiting, 0);
  }

  waitingIn(name: string): number {
    return this.#all.reduce((total, queue) => total + queue.waitingIn(name), 0);
  }

  waitingByClass(): Record<string, number> {
    return Object.fromEntries(this.classNames.map((name) => [name, this.waitingIn(name)]));
  }

  get rejected(): Readonly<Record<AdmissionFailure, number>> {
    return sumRejections(this.#all.map((queue) => queue.rejected));
  }

  rejectedIn(name: string): Readonly<Record<AdmissionFailure, number>> {
    return sumRejections(this.#all.map((queue) => queue.rejectedIn(name)));
  }

  observeWaits(observer: WaitObserver): void {
    this.#observers.push(observer);
    for (const queue of this.#all) queue.observeWaits(observer);
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

function sumRejections(
  counts: ReadonlyArray<Readonly<Record<AdmissionFailure, number>>>,
): Record<AdmissionFailure, number> {
  const total = Object.fromEntries(ADMISSION_FAILURES.map((reason) => [reason, 0])) as Record<AdmissionFailure, number>;
  for (const count of counts) for (const reason of ADMISSION_FAILURES) total[reason] += count[reason];
  return total;
}
