/**
 * When to restart a supervised engine: exponential backoff (`restart_backoff` doubling up to
 * `restart_backoff_max`), forgotten once the engine stayed ready for `stable_after`, and no more
 * restarts after `max_restarts` in a row. Pure: the clock comes in from outside.
 */

export interface RestartPolicyOptions {
  backoffMs: number;
  backoffMaxMs: number;
  stableAfterMs: number;
  maxRestarts: number;
  now: () => number;
}

export type RestartDecision =
  | { restart: true; attempt: number; delayMs: number }
  | { restart: false; attempts: number };

export class RestartPolicy {
  readonly #opts: RestartPolicyOptions;
  /** Restarts in a row, without a stable run between them. */
  #inARow = 0;
  #readySince: number | null = null;

  constructor(opts: RestartPolicyOptions) {
    this.#opts = opts;
  }

  get inARow(): number {
    return this.#inARow;
  }

  /** The engine is ready now (idempotent while it stays ready). */
  ready(): void {
    this.#readySince ??= this.#opts.now();
  }

  /** The engine left `ready`: the stable period starts again at its next ready. */
  notReady(): void {
    this.#forgetIfStable();
    this.#readySince = null;
  }

  /** The engine ended (exited, failed, stalled...): restart it after `delayMs`, or give up. */
  next(): RestartDecision {
    this.notReady();
    const { backoffMs, backoffMaxMs, maxRestarts } = this.#opts;
    if (this.#inARow >= maxRestarts) return { restart: false, attempts: this.#inARow };
    this.#inARow++;
    const delayMs = Math.min(backoffMaxMs, backoffMs * 2 ** (this.#inARow - 1));
    return { restart: true, attempt: this.#inARow, delayMs };
  }

  /** An operator asked for a restart: a fresh series. */
  reset(): void {
    this.#inARow = 0;
    this.#readySince = null;
  }

  #forgetIfStable(): void {
    if (this.#readySince !== null && this.#opts.now() - this.#readySince >= this.#opts.stableAfterMs) this.#inARow = 0;
  }
}
