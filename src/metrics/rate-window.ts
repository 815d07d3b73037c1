/**
 * A sliding window of per-second buckets: sums, rates and means over the last minute for the
 * serving view. Pure: every call takes the time, so tests drive it with a fake clock.
 */

/** The serving view's "last minute". */
export const SERVING_WINDOW_MS = 60_000;
const BUCKET_MS = 1_000;

export class SlidingWindow {
  readonly #windowMs: number;
  readonly #bucketMs: number;
  readonly #sums: Float64Array;
  readonly #counts: Uint32Array;
  /** Per slot: the bucket number (time / bucketMs) it holds; a slot from an older lap is stale. */
  readonly #stamps: Float64Array;
  readonly #startedAt: number;

  constructor(startedAt: number, windowMs = SERVING_WINDOW_MS, bucketMs = BUCKET_MS) {
    if (!(bucketMs > 0) || windowMs < bucketMs) throw new RangeError('SlidingWindow: needs windowMs >= bucketMs > 0');
    const slots = Math.ceil(windowMs / bucketMs);
    this.#windowMs = slots * bucketMs;
    this.#bucketMs = bucketMs;
    this.#sums = new Float64Array(slots);
    this.#counts = new Uint32Array(slots);
    this.#stamps = new Float64Array(slots).fill(-1);
    this.#startedAt = startedAt;
  }

  /** Adds `value` (an event, a token count, a sample) at time `now`. */
  add(now: number, value = 1): void {
    const bucket = Math.floor(now / this.#bucketMs);
    const slot = bucket % this.#sums.length;
    if (this.#stamps[slot] !== bucket) {
      this.#stamps[slot] = bucket;
      this.#sums[slot] = 0;
      this.#counts[slot] = 0;
    }
    this.#sums[slot] += value;
    this.#counts[slot] += 1;
  }

  /** The sum of what was added in the window ending at `now`. */
  sum(now: number): number {
    let total = 0;
    this.#eachLive(now, (slot) => {
      total += this.#sums[slot];
    });
    return total;
  }

  /**
   * Per second over the window; a window younger than a minute divides by its age (at least one
   * bucket), so a fleet that just started shows its rate at once rather than a minute-long ramp.
   */
  rate(now: number): number {
    const span = Math.min(this.#windowMs, Math.max(this.#bucketMs, now - this.#startedAt));
    return this.sum(now) / (span / 1000);
  }

  /** The mean of the values added in the window (samples of a gauge); null when none. */
  mean(now: number): number | null {
    let total = 0;
    let count = 0;
    this.#eachLive(now, (slot) => {
      total += this.#sums[slot];
      count += this.#counts[slot];
    });
    return count === 0 ? null : total / count;
  }

  #eachLive(now: number, fn: (slot: number) => void): void {
    const current = Math.floor(now / this.#bucketMs);
    const oldest = current - this.#sums.length + 1;
    for (let slot = 0; slot < this.#sums.length; slot++) {
      const stamp = this.#stamps[slot];
      if (stamp >= oldest && stamp <= current) fn(slot);
    }
  }
}
