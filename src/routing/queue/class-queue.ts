/**
 * The waiters of one priority class: one FIFO flow per API key, served round-robin between keys, so
 * that one key's thousands of queued batch requests do not stand in front of another key's. With no
 * API keys every request is in the one `null` flow and the class is plain FIFO.
 */

export interface QueueClass {
  name: string;
  /** Most requests of this class waiting at once. */
  maxWaiting: number;
  /** ms a request of this class may wait; 0 = as long as its client does. */
  timeoutMs: number;
  /**
   * The timeout bounds only a wait while no backend is ready (the inherited `queue.timeout` under the
   * adaptive cap, where a wait for a busy fleet is the normal way a batch job runs).
   */
  timeoutOnlyWhenNoneReady: boolean;
}

/** What a class queue holds; the wait queue's waiter extends it. */
export interface Queued {
  readonly key: string | null;
  /** When it joined the queue (the injected clock). */
  readonly since: number;
}

interface Flow<W extends Queued> {
  key: string | null;
  waiters: W[];
}

export class ClassQueue<W extends Queued> {
  readonly spec: QueueClass;
  /** 0 is the highest class. */
  readonly rank: number;
  /** Flows with waiters, in round-robin order; `#next` is the index of the one served next. */
  readonly #flows: Flow<W>[] = [];
  readonly #byKey = new Map<string | null, Flow<W>>();
  #next = 0;
  #size = 0;

  constructor(spec: QueueClass, rank: number) {
    this.spec = spec;
    this.rank = rank;
  }

  get size(): number {
    return this.#size;
  }

  /** `first`: at the head of its flow (a request that was already admitted once, continuing). */
  push(waiter: W, first = false): void {
    let flow = this.#byKey.get(waiter.key);
    if (flow === undefined) {
      flow = { key: waiter.key, waiters: [] };
      this.#byKey.set(waiter.key, flow);
      this.#flows.push(flow);
    }
    if (first) flow.waiters.unshift(waiter);
    else flow.waiters.push(waiter);
    this.#size++;
  }

  /** The waiter served next within the class: the head of the flow whose turn it is. */
  peek(): W | undefined {
    return this.#flows[this.#next]?.waiters[0];
  }

  /** The waiters of the flow whose turn it is, at most `limit`, in order (the first is `peek()`). */
  ahead(limit: number): readonly W[] {
    return this.#flows[this.#next]?.waiters.slice(0, limit) ?? [];
  }

  /** The waiter that has waited longest (the oldest flow head), for promotion. */
  oldest(): W | undefined {
    let oldest: W | undefined;
    for (const flow of this.#flows) {
      const head = flow.waiters[0];
      if (oldest === undefined || head.since < oldest.since) oldest = head;
    }
    return oldest;
  }

  /** Takes `waiter` out (served, timed out or gone); a served flow head passes the turn to the next key. */
  remove(waiter: W): boolean {
    const flow = this.#byKey.get(waiter.key);
    const index = flow === undefined ? -1 : flow.waiters.indexOf(waiter);
    if (flow === undefined || index < 0) return false;
    const wasTurn = this.#flows[this.#next] === flow && index === 0;
    flow.waiters.splice(index, 1);
    this.#size--;
    const position = this.#flows.indexOf(flow);
    if (flow.waiters.length === 0) {
      this.#byKey.delete(flow.key);
      this.#flows.splice(position, 1);
      if (position < this.#next) this.#next--;
    } else if (wasTurn) {
      this.#next++;
    }
    if (this.#next >= this.#flows.length) this.#next = 0;
    return true;
  }

  /** Empties the class, oldest flows first. */
  drainAll(): W[] {
    const all = this.#flows.flatMap((flow) => flow.waiters);
    this.#flows.length = 0;
    this.#byKey.clear();
    this.#next = 0;
    this.#size = 0;
    return all;
  }
}
