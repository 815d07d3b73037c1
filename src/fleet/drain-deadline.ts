/**
 * The drain deadline (`health.drain_deadline`, docs/stream-resume.md): a drained backend takes no new
 * requests, but a long stream could keep it busy for as long as it generates, and an operator who
 * needs the GPU back would have to kill it, cutting every stream. Once the backend has been draining
 * for its deadline, the requests still running on it are ended through the same path as an upstream
 * failure: a stream with content sent resumes on another backend (reason `drain_deadline`), one with
 * nothing sent yet is re-sent, as the progress watchdog's `no_progress` ends are.
 *
 * Every drain counts: the admin drain and delete, a backend that left the config on reload, a DNS
 * record that vanished. The deadline starts when the backend turns `draining` (the fleet calls
 * `drained`); a drain call may set its own (`set`, from now; 0 = none); a backend that leaves
 * `draining` (resumed) or the fleet (removed) has none. No I/O but the one timer per draining
 * backend, and that comes in through `schedule`.
 *
 * Wiring: per upstream attempt the data path calls `track(backend, attempt)` once the backend is
 * chosen and `untrack` when the attempt ends; `attempt.endDrained(reason)` ends it.
 */
import { formatDuration } from '../config/duration.js';

/** An attempt running on a backend (routing/fleet-attempt.ts). */
export interface DrainedAttempt {
  /** Ends the attempt as an upstream failure would (resumed or re-sent elsewhere). */
  endDrained(reason: string): void;
}

/** Runs `fire` in `ms`; the returned function cancels it. */
export type Schedule = (fire: () => void, ms: number) => () => void;

export interface DrainDeadlineOptions<B> {
  /** `health.drain_deadline` in ms; 0 = no deadline unless a drain call sets one. */
  defaultMs: number;
  /** The timer (tests inject one); default `setTimeout`, unref'd. */
  schedule?: Schedule;
  /** The deadline passed with `ended` requests still on the backend (the fleet logs it). */
  passed?: (backend: B, ended: number, deadlineMs: number) => void;
}

interface Deadline {
  ms: number;
  cancel: () => void;
}

const unrefTimer: Schedule = (fire, ms) => {
  const timer = setTimeout(fire, ms);
  timer.unref();
  return () => clearTimeout(timer);
};

export class DrainDeadlines<B> {
  readonly #opts: DrainDeadlineOptions<B>;
  readonly #schedule: Schedule;
  readonly #attempts = new Map<B, Set<DrainedAttempt>>();
  readonly #deadlines = new Map<B, Deadline>();

  constructor(opts: DrainDeadlineOptions<B>) {
    this.#opts = opts;
    this.#schedule = opts.schedule ?? unrefTimer;
  }

  track(backend: B, attempt: DrainedAttempt): void {
    let attempts = this.#attempts.get(backend);
    if (attempts === undefined) {
      attempts = new Set();
      this.#attempts.set(backend, attempts);
    }
    attempts.add(attempt);
  }

  untrack(backend: B, attempt: DrainedAttempt): void {
    const attempts = this.#attempts.get(backend);
    if (attempts === undefined) return;
    attempts.delete(attempt);
    if (attempts.size === 0) this.#attempts.delete(backend);
  }

  /** The backend turned `draining`: the configured deadline starts now, unless a drain call set one. */
  drained(backend: B): void {
    if (!this.#deadlines.has(backend)) this.set(backend, this.#opts.defaultMs);
  }

  /** A drain call's own deadline for the backend, counted from now; 0 = none. */
  set(backend: B, ms: number): void {
    this.#deadlines.get(backend)?.cancel();
    // Kept at 0 too: a later `drained` of the same drain keeps the caller's "no deadline".
    const deadline: Deadline = { ms, cancel: () => {} };
    if (ms > 0) deadline.cancel = this.#schedule(() => this.#pass(backend, deadline), ms);
    this.#deadlines.set(backend, deadline);
  }

  /** The deadline set for the backend's drain in ms (0 = none), or null when it is not draining. */
  deadlineOf(backend: B): number | null {
    return this.#deadlines.get(backend)?.ms ?? null;
  }

  /** The backend left `draining` (resumed) or the fleet: no deadline any more. */
  undrained(backend: B): void {
    this.#deadlines.get(backend)?.cancel();
    this.#deadlines.delete(backend);
  }

  stop(): void {
    for (const deadline of this.#deadlines.values()) deadline.cancel();
    this.#deadlines.clear();
  }

  #pass(backend: B, deadline: Deadline): void {
    if (this.#deadlines.get(backend) !== deadline) return;
    const attempts = [...(this.#attempts.get(backend) ?? [])];
    this.#opts.passed?.(backend, attempts.length, deadline.ms);
    const reason = `the backend was drained and its drain deadline (${formatDuration(deadline.ms)}) passed`;
    for (const attempt of attempts) attempt.endDrained(reason);
  }
}
