/** Percentiles and medians. */

/** The p-th percentile (0-100) by nearest rank; NaN for no samples. Sorts a copy. */
export function percentile(values: ArrayLike<number>, p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = Float64Array.from(values).sort();
  return percentileSorted(sorted, p);
}

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

/** Field-by-field medians of a list of runs (numeric fields only). */
export function medianOfRuns<T extends object>(runs: readonly T[]): Record<keyof T, number> {
  const out = {} as Record<keyof T, number>;
  if (runs.length === 0) return out;
  for (const key of Object.keys(runs[0]) as (keyof T)[]) {
    const values = runs.map((r) => r[key]).filter((v): v is T[keyof T] & number => typeof v === 'number');
    if (values.length > 0) out[key] = median(values);
  }
  return out;
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
