/**
 * Admission: hands out leases on ready backends with a free slot, and holds requests in one central
 * queue while there is none (nothing ready yet, or every backend at its cap). The queue is ordered by
 * priority class (`queue.classes`, highest first): when a slot frees, the highest class with a waiter
 * goes first, round-robin between API keys within a class (class-queue.ts), except that a request
 * that has waited longer than `maxStarvationMs` is promoted. A waiter leaves the
 * queue on its class's timeout or when its client goes away. The policy only chooses a backend; this
 * owns the bookkeeping (as undici's pool-base does).
 */
import type { Backend } from '../../fleet/registry.js';
import { backendLoad, type RoutedBackend, RoutedViews } from '../load/backend-load.js';
import type { Policy } from '../policies/policy-contract.js';
import type { RequestTraits } from '../request-traits.js';
import { ClassQueue, type QueueClass, type Queued } from './class-queue.js';

export type { QueueClass } from './class-queue.js';

/** What a waiter listens to for its client leaving: an `AbortSignal`, or the proxy's cheaper `ClientGone`. */
export interface AbortLike {
  readonly aborted: boolean;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/** Who counts the requests on each backend: the fleet registry. */
interface SlotCounter {
  take(backend: Backend): void;
  /** Also lets the registry finish removing a drained backend, and tells waiters a slot freed. */
  release(backend: Backend): void;
}

export interface Lease {
  readonly backend: Backend;
  /** Idempotent: call from every ending (completion, upstream failure, client abort). */
  release(): void;
}

export type AdmissionFailure = 'queue_full' | 'timeout' | 'aborted' | 'shutdown';
export const ADMISSION_FAILURES: readonly AdmissionFailure[] = ['queue_full', 'timeout', 'aborted', 'shutdown'];

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
  /** The request's priority class. */
  readonly className: string;
  /** No backend was ready when it was refused: the fleet, not only its capacity, is unavailable. */
  readonly fleetUnavailable: boolean;
  constructor(reason: AdmissionFailure, message: string, className: string, fleetUnavailable: boolean) {
    super(message);
    this.reason = reason;
    this.code = ADMISSION_CODES[reason];
    this.className = className;
    this.fleetUnavailable = fleetUnavailable;
  }
}

interface Waiter extends Queued {
  resolve(lease: Lease): void;
  reject(error: AdmissionError): void;
  avoid: ReadonlySet<Backend> | undefined;
  /** What the policy may route on (its prompt prefix, session key). */
  traits: RequestTraits | undefined;
  queue: ClassQueue<Waiter>;
  cleanup(): void;
}

/** The queue of one class when none are configured (tests, and the shape of the old single queue). */
const SINGLE_CLASS = 'default';

export interface WaitQueueOptions {
  /** Most requests waiting at once, all classes together. */
  maxWaiting: number;
  /** Without `classes`: the one class's timeout (ms; 0 = none). */
  timeoutMs?: number;
  /**
   * Without `classes`: with adaptive caps a request waits here instead of in a backend's own queue,
   * where nothing times it out: then `timeoutMs` bounds only a wait while no backend is ready.
   */
  timeoutOnlyWhenNoneReady?: boolean;
  /** Priority classes, highest first. Default: one class with `maxWaiting` and `timeoutMs`. */
  classes?: readonly QueueClass[];
  /** Class of a request that names none. Default: the lowest class. */
  defaultClass?: string;
  /** A lower-class waiter older than this (ms) is promoted (see `#nextWaiter`); 0 = never. */
  maxStarvationMs?: number;
  /**
   * With a policy that has `affinity` (prefix-aware): how many waiters behind the head of its flow a
   * freed slot may go to, ahead of a head whose prompt is cached on none of the free backends; 0 = off.
   */
  affinityLookahead?: number;
  /** A head that has waited longer than this (ms) is not passed over for affinity. */
  affinityHoldMs?: number;
  /** Slots above each capped backend's cap that only the highest class may fill; 0 = none. */
  reserve?: number;
  /** Clock for waits and promotion (ms). */
  now?: () => number;
  /**
   * With load reports (`routing.cap_scope: fleet`), a fixed or `auto` cap holds against the backend's
   * load (what it reports running and queued, every replica's requests, plus this replica's
   * dispatches since: backend-load.ts), not this replica's in-flight alone, so N replicas share one cap.
   */
  fleetWideCap?: boolean;
  /**
   * The replicas that send to these backends alike (`routing.replicas`). Between two load reports a
   * replica cannot see another's dispatches, so each of its own since counts N times in the load the
   * policy and the bound compare (backend-load.ts). With `fleetWideCap` that makes each take at most
   * 1/N of the room the last report showed (its own requests that ended since count back in), and N
   * replicas meeting the same burst together stay within the cap; a backend not read yet: 1/N of the
   * cap itself. 1: this replica may take all of it.
   */
  replicas?: number;
  /** Ready backends, read per admission (the registry keeps this list prebuilt). */
  ready: () => readonly Backend[];
  policy: Policy;
  slots: SlotCounter;
}

export type WaitObserver = (className: string, waitedMs: number) => void;

const noFailures = (): Record<AdmissionFailure, number> => ({ queue_full: 0, timeout: 0, aborted: 0, shutdown: 0 });

export class WaitQueue {
  readonly #opts: WaitQueueOptions;
  readonly #now: () => number;
  /** Highest first. */
  readonly #classes: ClassQueue<Waiter>[];
  readonly #byName = new Map<string, ClassQueue<Waiter>>();
  readonly #default: ClassQueue<Waiter>;
  readonly #maxStarvation: number;
  readonly #reserve: number;
  readonly #lookahead: number;
  readonly #holdMs: number;
  readonly #views: RoutedViews;
  readonly #scratch: RoutedBackend[] = [];
  readonly #poolScratch: RoutedBackend[] = [];
  readonly #rejected = noFailures();
  readonly #rejectedByClass = new Map<string, Record<AdmissionFailure, number>>();
  #waiting = 0;
  #onWaited: WaitObserver | null = null;

  constructor(opts: WaitQueueOptions) {
    this.#opts = opts;
    this.#views = new RoutedViews(opts.replicas);
    this.#now = opts.now ?? performance.now.bind(performance);
    const specs = opts.classes ?? [
      {
        name: SINGLE_CLASS,
        maxWaiting: opts.maxWaiting,
        timeoutMs: opts.timeoutMs ?? 0,
        timeoutOnlyWhenNoneReady: opts.timeoutOnlyWhenNoneReady ?? false,
      },
    ];
    if (specs.length === 0) throw new Error('a wait queue needs at least one class');
    this.#classes = specs.map((spec, rank) => new ClassQueue<Waiter>(spec, rank));
    for (const queue of this.#classes) {
      this.#byName.set(queue.spec.name, queue);
      this.#rejectedByClass.set(queue.spec.name, noFailures());
    }
    this.#default = this.#byName.get(opts.defaultClass ?? '') ?? this.#classes[this.#classes.length - 1];
    this.#maxStarvation = opts.maxStarvationMs ?? 0;
    // Above the cap for the top class only: with a single class there is no one to keep them from.
    this.#reserve = this.#classes.length > 1 ? (opts.reserve ?? 0) : 0;
    this.#lookahead = opts.policy.affinity === undefined ? 0 : (opts.affinityLookahead ?? 0);
    this.#holdMs = opts.affinityHoldMs ?? 0;
  }

  /** `observer` hears of every waiter that got a backend, and how long it waited (not of requests served at once). */
  observeWaits(observer: WaitObserver): void {
    this.#onWaited = observer;
  }

  /** Class names, highest first. */
  get classNames(): string[] {
    return this.#classes.map((queue) => queue.spec.name);
  }

  get waiting(): number {
    return this.#waiting;
  }

  /** Requests of class `name` waiting now (0 for an unknown class). */
  waitingIn(name: string): number {
    return this.#byName.get(name)?.size ?? 0;
  }

  /** Requests waiting now, per class, highest first. */
  waitingByClass(): Record<string, number> {
    const waiting: Record<string, number> = {};
    for (const queue of this.#classes) waiting[queue.spec.name] = queue.size;
    return waiting;
  }

  /** Rejections of every class together. */
  get rejected(): Readonly<Record<AdmissionFailure, number>> {
    return this.#rejected;
  }

  /** Rejections of class `name`. */
  rejectedIn(name: string): Readonly<Record<AdmissionFailure, number>> {
    return this.#rejectedByClass.get(name) ?? noFailures();
  }

  /**
   * A lease now if a slot is free for this request's class, else a place in its class's queue.
   * `avoid`: backends that already failed this request; they are used only if nothing else is
   * available. `traits`: its class and API key (default: the default class, no key). `first`: the
   * continuation of a stream already running (proxy/stream-resume.ts): its client waits mid-answer,
   * so it takes a free slot at once and otherwise waits at the head of its class.
   */
  acquire(
    signal?: AbortLike,
    avoid?: ReadonlySet<Backend>,
    traits?: RequestTraits,
    first = false,
  ): Lease | Promise<Lease> {
    const queue = (traits && this.#byName.get(traits.priority)) || this.#default;
    // A client already gone gets no slot, even a free one: nothing would release it in time.
    if (signal?.aborted) return Promise.reject(this.#reject(queue, 'aborted', 'client went away'));
    // Waiters of this class or above were here first; lower ones yield (they would have taken a
    // slot free to them already, so one free now is a reserved slot or appeared this tick).
    if (first || !this.#anyWaitingFrom(queue.rank)) {
      const lease = this.#tryLease(avoid, traits, queue);
      if (lease) return lease;
    }
    if (this.#waiting >= this.#opts.maxWaiting) {
      return Promise.reject(this.#reject(queue, 'queue_full', `${this.#waiting} requests already waiting`));
    }
    if (queue.size >= queue.spec.maxWaiting) {
      const message = `${queue.size} requests of class "${queue.spec.name}" already waiting (its max_waiting)`;
      return Promise.reject(this.#reject(queue, 'queue_full', message));
    }
    return new Promise<Lease>((resolve, reject) => {
      const { timeoutMs, timeoutOnlyWhenNoneReady } = queue.spec;
      let timer: NodeJS.Timeout | undefined;
      const onTimeout = () => {
        if (timeoutOnlyWhenNoneReady && this.#opts.ready().length > 0) {
          timer = setTimeout(onTimeout, timeoutMs);
          return;
        }
        this.#remove(waiter);
        reject(this.#reject(queue, 'timeout', `no backend became available within ${timeoutMs} ms`));
      };
      if (timeoutMs > 0) timer = setTimeout(onTimeout, timeoutMs);
      const onAbort = () => {
        this.#remove(waiter);
        reject(this.#reject(queue, 'aborted', 'client went away'));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const waiter: Waiter = {
        key: traits?.apiKey ?? null,
        since: this.#now(),
        resolve,
        reject,
        avoid,
        traits,
        queue,
        cleanup: () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
        },
      };
      queue.push(waiter, first);
      this.#waiting++;
    });
  }

  /** Call when capacity may have appeared (a backend turned ready, a cap was raised, a lease ended). */
  drain(): void {
    while (this.#waiting > 0) {
      const now = this.#now();
      let waiter = this.#preferCached(this.#nextWaiter(now), now);
      let lease = this.#tryLease(waiter.avoid, waiter.traits, waiter.queue);
      if (!lease && this.#reserve > 0 && waiter.queue.rank > 0) {
        // A promoted or lower waiter cannot fill a reserved slot, but a top-class one may.
        const top = this.#classes[0].peek();
        if (top) {
          waiter = top;
          lease = this.#tryLease(waiter.avoid, waiter.traits, waiter.queue);
        }
      }
      if (!lease) return;
      this.#remove(waiter);
      this.#onWaited?.(waiter.queue.spec.name, now - waiter.since);
      waiter.resolve(lease);
    }
  }

  /** Fails every waiter (shutdown): they are answered at once rather than left until connections close. */
  close(): void {
    for (const queue of this.#classes) {
      for (const waiter of queue.drainAll()) {
        this.#waiting--;
        waiter.cleanup();
        waiter.reject(this.#reject(queue, 'shutdown', 'fleetgate is shutting down'));
      }
    }
  }

  /**
   * The one to serve: the turn in the highest class with waiters, unless a lower-class waiter has
   * starved. A starved waiter is promoted into that class as if it had arrived `maxStarvation`
   * after it really did: it goes before requests that came later than that, not before all of them,
   * so a batch job whose requests routinely wait longer than `maxStarvation` delays a quick request
   * by that wait minus `maxStarvation`, not by the whole of it.
   */
  #nextWaiter(now: number): Waiter {
    let top: Waiter | undefined;
    let starved: Waiter | undefined;
    for (const queue of this.#classes) {
      if (queue.size === 0) continue;
      if (top === undefined) {
        top = queue.peek() as Waiter;
        if (this.#maxStarvation === 0) break;
        continue;
      }
      const oldest = queue.oldest() as Waiter;
      if (now - oldest.since > this.#maxStarvation && (starved === undefined || oldest.since < starved.since)) {
        starved = oldest;
      }
    }
    if (starved !== undefined && starved.since + this.#maxStarvation < (top as Waiter).since) return starved;
    return top as Waiter;
  }

  /**
   * A head whose prompt is cached on a busy backend holds out for it (it frees room soon) instead of
   * prefilling its whole prompt on the free one (issue #20): the slot goes to the first waiter behind
   * it (within `affinityLookahead` of its flow) cached on a free backend, else to the first cached
   * nowhere, which loses nothing anywhere. Work-conserving: with neither, the head takes the slot; a
   * head older than `affinityHoldMs`, or one promoted from a lower class, is never passed over.
   */
  #preferCached(head: Waiter, now: number): Waiter {
    if (this.#lookahead === 0 || now - head.since > this.#holdMs || head.queue.peek() !== head) return head;
    const policy = this.#opts.policy;
    const ready = this.#opts.ready();
    const mayUseReserve = this.#mayUseReserve(head.queue);
    const free = ready.filter((backend) => this.#hasRoom(backend, mayUseReserve));
    const pool = ready.map((backend) => this.#views.of(backend));
    const cachedOn = (waiter: Waiter, backends: readonly Backend[]) =>
      backends.some(
        (backend) =>
          !waiter.avoid?.has(backend) && policy.affinity?.(this.#views.of(backend), waiter.traits, pool) === true,
      );
    if (free.length === 0 || cachedOn(head, free) || !cachedOn(head, ready)) return head;
    let cold: Waiter | undefined;
    for (const waiter of head.queue.ahead(this.#lookahead)) {
      if (waiter === head) continue;
      if (cachedOn(waiter, free)) return waiter;
      if (cold === undefined && !cachedOn(waiter, ready)) cold = waiter;
    }
    return cold ?? head;
  }

  #anyWaitingFrom(rank: number): boolean {
    if (this.#waiting === 0) return false;
    for (let i = 0; i <= rank; i++) if (this.#classes[i].size > 0) return true;
    return false;
  }

  #mayUseReserve(queue: ClassQueue<Waiter>): boolean {
    return queue.rank === 0;
  }

  #hasRoom(backend: Backend, mayUseReserve: boolean): boolean {
    if (backend.cap === 0) return true;
    const limit = mayUseReserve ? backend.cap + this.#reserve : backend.cap;
    if (this.#opts.fleetWideCap !== true) return backend.inflight < limit;
    // Each dispatch since the last report counts N times (backend-load.ts): N replicas filling the
    // same room between two reports each take 1/N of it.
    const share = this.#opts.replicas ?? 1;
    if (backendLoad(backend, share) >= limit) return false;
    // Not read yet (or it reports nothing): the other replicas' requests are unseen, so each holds its
    // 1/N of the cap. Without it N replicas meeting a burst before their first reports hold N caps.
    return backend.reported !== null || backend.inflight < Math.ceil(limit / share);
  }

  /**
   * A top-class request goes where the fewest wait in the backend's own queue, which fleetgate does
   * not order: SGLang admits first come first served, so there it would wait behind every batch
   * request already queued (docs/decisions.md, "Priority classes"). Among those, the policy picks.
   */
  #leastQueued(free: RoutedBackend[]): void {
    let least = Number.POSITIVE_INFINITY;
    for (const backend of free) least = Math.min(least, backend.ownQueue);
    let kept = 0;
    for (const backend of free) if (backend.ownQueue === least) free[kept++] = backend;
    free.length = kept;
  }

  #tryLease(
    avoid: ReadonlySet<Backend> | undefined,
    traits: RequestTraits | undefined,
    queue: ClassQueue<Waiter>,
  ): Lease | null {
    const mayUseReserve = this.#mayUseReserve(queue);
    const free = this.#scratch;
    const pool = this.#poolScratch;
    free.length = 0;
    pool.length = 0;
    for (const backend of this.#opts.ready()) {
      const view = this.#views.of(backend);
      pool.push(view);
      if (this.#hasRoom(backend, mayUseReserve) && !avoid?.has(backend)) free.push(view);
    }
    if (free.length === 0 && avoid && avoid.size > 0) {
      for (const backend of this.#opts.ready())
        if (this.#hasRoom(backend, mayUseReserve)) free.push(this.#views.of(backend));
    }
    if (free.length === 0) return null;
    if (queue.rank === 0 && this.#classes.length > 1 && free.length > 1) this.#leastQueued(free);
    const policy = this.#opts.policy;
    const picked = policy.pick(free, traits, pool);
    free.length = 0;
    pool.length = 0;
    policy.onDispatch?.(picked, traits);
    return this.#lease(picked.backend);
  }

  #lease(backend: Backend): Lease {
    const slots = this.#opts.slots;
    slots.take(backend);
    let released = false;
    return {
      backend,
      release: () => {
        if (released) return;
        released = true;
        // The registry's `capacity` event drains the queues (registry-wiring.ts), not this.
        slots.release(backend);
      },
    };
  }

  #remove(waiter: Waiter): void {
    waiter.cleanup();
    if (waiter.queue.remove(waiter)) this.#waiting--;
  }

  #reject(queue: ClassQueue<Waiter>, reason: AdmissionFailure, message: string): AdmissionError {
    this.#rejected[reason]++;
    (this.#rejectedByClass.get(queue.spec.name) as Record<AdmissionFailure, number>)[reason]++;
    const fleetUnavailable = this.#opts.ready().length === 0;
    return new AdmissionError(reason, message, queue.spec.name, fleetUnavailable);
  }
}
