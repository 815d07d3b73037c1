/** Percentiles and medians. */

/** The p-th percentile (0-100) by nearest rank of sorted values; NaN for no samples. */
export function percentileSorted(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

/** Median of finite values (mean of the two middle ones for an even count); NaN if none. */
export function median(values: readonly number[]): number {
  const finite = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (finite.length === 0) return Number.NaN;
  const mid = finite.length >> 1;
  return finite.length % 2 === 1 ? finite[mid] : (finite[mid - 1] + finite[mid]) / 2;
}

/** A growable Float64Array for latency samples (no per-sample allocation). */
export class Samples {
  #data: Float64Array;
  #length = 0;
  constructor(capacity = 1024) {
    this.#data = new Float64Array(capacity);
  }
  push(value: number): void {
    if (this.#length === this.#data.length) {
      const bigger = new Float64Array(this.#data.length * 2);
      bigger.set(this.#data);
      this.#data = bigger;
    }
    this.#data[this.#length++] = value;
  }
  get length(): number {
    return this.#length;
  }
  sorted(): Float64Array {
    return this.#data.slice(0, this.#length).sort();
  }
}
