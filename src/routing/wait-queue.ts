/**
 * Admission: hands out leases on ready backends with a free slot, and holds requests in one central
 * queue while there is none (nothing ready yet, or every backend at its cap). A waiter is served as
 * soon as a slot frees or a backend turns ready; it leaves the queue on timeout or when its client
 * goes away. The policy only chooses; this owns the bookkeeping (as undici's pool-base does).
 */
import type { Backend } from '../fleet/registry.js';
import type { Policy } from './policies.js';
import type { AbortLike, RequestTraits } from './request-context.js';

export interface Lease {
  readonly backend: Backend;
  /** Idempotent: call from every ending (completion, upstream failure, client abort). */
  release(): void;
}

export type AdmissionFailure = 'queue_full' | 'timeout' | 'aborted' | 'shutdown';

/** The `code` a refused request's error carries to the HTTP side (undici errors carry theirs the same way). */
const ADMISSION_CODES = {
  queue_full: 'FLEETGATE_QUEUE_FULL',
  timeout: 'FLEETGATE_QUEUE_TIMEOUT',
  aborted: 'FLEETGATE_CLIENT_GONE',
  shutdown: 'FLEETGATE_SHUTDOWN',
} as const satisfies Record<AdmissionFailure, string>;

export class AdmissionError extends Error {
  readonly reason: AdmissionFailure;
  readonly code: (typeof ADMISSION_CODES)[AdmissionFailure];
  constructor(reason: AdmissionFailure, message: string) {
    super(message);
    this.reason = reason;
    this.code = ADMISSION_CODES[reason];
  }
}

interface Waiter {
  resolve(lease: Lease): void;
  reject(error: AdmissionError): void;
  avoid: ReadonlySet<Backend> | undefined;
  cleanup(): void;
}

export interface WaitQueueOptions {
  maxWaiting: number;
  timeoutMs: number;
  /**
   * With adaptive caps a request waits here instead of in a backend's own queue, where nothing
   * times it out: then `timeoutMs` bounds only a wait while no backend is ready.
   */
  timeoutOnlyWhenNoneReady?: boolean;
  /** Ready backends, read per admission (the registry keeps this list prebuilt). */
  ready: () => readonly Backend[];
  policy: Policy;
  /** A lease ended; e.g. lets the registry finish removing a drained backend. */
  onRelease?: (backend: Backend) => void;
}

export class WaitQueue {
  readonly #opts: WaitQueueOptions;
  readonly #waiters: Waiter[] = [];
  readonly #scratch: Backend[] = [];
  #rejected = { queue_full: 0, timeout: 0, aborted: 0, shutdown: 0 };

  constructor(opts: WaitQueueOptions) {
    this.#opts = opts;
  }

  get waiting(): number {
    return this.#waiters.length;
  }

  get rejected(): Readonly<Record<AdmissionFailure, number>> {
    return this.#rejected;
  }

  /**
   * A lease now if a slot is free, else a place in the queue. `avoid`: backends that already failed
   * this request; they are used only if nothing else is available. `_traits`: what the request is
   * (key, model, priority), for admission rules that tell requests apart; none does yet.
   */
  acquire(signal?: AbortLike, avoid?: ReadonlySet<Backend>, _traits?: RequestTraits): Lease | Promise<Lease> {
    // A client already gone gets no slot, even a free one: nothing would release it in time.
    if (signal?.aborted) return Promise.reject(this.#reject('aborted', 'client went away'));
    if (this.#waiters.length === 0) {
      const lease = this.#tryLease(avoid);
      if (lease) return lease;
    }
    if (this.#waiters.length >= this.#opts.maxWaiting) {
      return Promise.reject(this.#reject('queue_full', `${this.#waiters.length} requests already waiting`));
    }
    return new Promise<Lease>((resolve, reject) => {
      // A timeout of 0 waits as long as the client does.
      let timer: NodeJS.Timeout | undefined;
      const onTimeout = () => {
        if (this.#opts.timeoutOnlyWhenNoneReady && this.#opts.ready().length > 0) {
          timer = setTimeout(onTimeout, this.#opts.timeoutMs);
          return;
        }
        this.#remove(waiter);
        reject(this.#reject('timeout', `no backend became available within ${this.#opts.timeoutMs} ms`));
      };
      if (this.#opts.timeoutMs > 0) timer = setTimeout(onTimeout, this.#opts.timeoutMs);
      const onAbort = () => {
        this.#remove(waiter);
        reject(this.#reject('aborted', 'client went away'));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const waiter: Waiter = {
        resolve,
        reject,
        avoid,
        cleanup: () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
        },
      };
      this.#waiters.push(waiter);
    });
  }

  /** Call when capacity may have appeared (a backend turned ready, a cap was raised). */
  drain(): void {
    while (this.#waiters.length > 0) {
      const lease = this.#tryLease(this.#waiters[0].avoid);
      if (!lease) return;
      const waiter = this.#waiters.shift() as Waiter;
      waiter.cleanup();
      waiter.resolve(lease);
    }
  }

  /** Fails every waiter (shutdown): they are answered at once rather than left until connections close. */
  close(): void {
    for (const waiter of this.#waiters.splice(0)) {
      waiter.cleanup();
      waiter.reject(this.#reject('shutdown', 'fleetgate is shutting down'));
    }
  }

  #tryLease(avoid: ReadonlySet<Backend> | undefined): Lease | null {
    const free = this.#scratch;
    free.length = 0;
    for (const backend of this.#opts.ready()) {
      if (backend.hasFreeSlot() && !avoid?.has(backend)) free.push(backend);
    }
    if (free.length === 0 && avoid && avoid.size > 0) {
      for (const backend of this.#opts.ready()) if (backend.hasFreeSlot()) free.push(backend);
    }
    if (free.length === 0) return null;
    const backend = this.#opts.policy.pick(free);
    free.length = 0;
    return this.#lease(backend);
  }

  #lease(backend: Backend): Lease {
    backend.inflight++;
    let released = false;
    return {
      backend,
      release: () => {
        if (released) return;
        released = true;
        backend.inflight--;
        this.#opts.onRelease?.(backend);
        this.drain();
      },
    };
  }

  #remove(waiter: Waiter): void {
    waiter.cleanup();
    const index = this.#waiters.indexOf(waiter);
    if (index >= 0) this.#waiters.splice(index, 1);
  }

  #reject(reason: AdmissionFailure, message: string): AdmissionError {
    this.#rejected[reason]++;
    return new AdmissionError(reason, message);
  }
}
