/**
 * A group of timers that can all be cancelled at once, so `stop()` leaves nothing behind
 * and `node:test` exits. A cancelled `sleep()` never settles; the awaiting async function is dropped.
 */
export class Timers {
  #timeouts = new Set<NodeJS.Timeout>();
  #immediates = new Set<NodeJS.Immediate>();

  /** ms <= 0 runs on the next event-loop turn (setImmediate). Returns a cancel function. */
  set(fn: () => void, ms: number): () => void {
    if (ms <= 0) {
      const handle = setImmediate(() => {
        this.#immediates.delete(handle);
        fn();
      });
      this.#immediates.add(handle);
      return () => {
        clearImmediate(handle);
        this.#immediates.delete(handle);
      };
    }
    const handle = setTimeout(() => {
      this.#timeouts.delete(handle);
      fn();
    }, ms);
    this.#timeouts.add(handle);
    return () => {
      clearTimeout(handle);
      this.#timeouts.delete(handle);
    };
  }

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.set(resolve, ms);
    });
  }

  clearAll(): void {
    for (const handle of this.#timeouts) clearTimeout(handle);
    for (const handle of this.#immediates) clearImmediate(handle);
    this.#timeouts.clear();
    this.#immediates.clear();
  }

  get size(): number {
    return this.#timeouts.size + this.#immediates.size;
  }
}
