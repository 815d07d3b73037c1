/**
 * A quantile of a histogram over the last minute, for the serving view: the histogram's cumulative
 * bucket counts are copied once a second, and the quantile is read from the difference between the
 * newest copy and the oldest one still in the window, interpolated inside its bucket as
 * Prometheus's `histogram_quantile` does. Pure: every call takes the time.
 */
import { SERVING_WINDOW_MS } from './rate-window.js';

/** What is read of a histogram series (backend-histogram.ts's HistogramSeries). */
export interface BucketCounts {
  readonly bounds: readonly number[];
  /** Per bucket, not cumulative. */
  readonly counts: ArrayLike<number>;
}

interface Snapshot {
  at: number;
  counts: Float64Array;
}

export class WindowQuantile {
  readonly #source: BucketCounts;
  readonly #windowMs: number;
  readonly #snapshots: Snapshot[] = [];

  constructor(source: BucketCounts, windowMs = SERVING_WINDOW_MS) {
    this.#source = source;
    this.#windowMs = windowMs;
  }

  /** Copies the counts as they are at `now`; the oldest copies beyond the window are dropped. */
  sample(now: number): void {
    const snapshots = this.#snapshots;
    snapshots.push({ at: now, counts: Float64Array.from(this.#source.counts) });
    // One copy at or before the window's start stays: the baseline the window's counts are read against.
    while (snapshots.length > 2 && snapshots[1].at <= now - this.#windowMs) snapshots.shift();
  }

  /**
   * The `q` quantile (0..1) of what was observed between the window's baseline copy and the newest
   * one; null with no observation in the window (or before two copies).
   */
  quantile(q: number): number | null {
    const snapshots = this.#snapshots;
    if (snapshots.length < 2) return null;
    const from = snapshots[0].counts;
    const to = snapshots[snapshots.length - 1].counts;
    const deltas = Array.from(to, (count, i) => count - from[i]);
    return bucketQuantile(q, this.#source.bounds, deltas);
  }
}

/**
 * `histogram_quantile` over non-cumulative bucket counts with upper `bounds`: linear inside the
 * bucket holding the rank (the first bucket starts at 0). Observations above the last bound are
 * not in `counts`; null when there are none.
 */
export function bucketQuantile(q: number, bounds: readonly number[], counts: readonly number[]): number | null {
  let total = 0;
  for (const count of counts) total += count;
  if (total === 0) return null;
  const rank = q * total;
  let below = 0;
  for (let i = 0; i < counts.length; i++) {
    if (below + counts[i] >= rank && counts[i] > 0) {
      const lower = i === 0 ? 0 : bounds[i - 1];
      return lower + (bounds[i] - lower) * ((rank - below) / counts[i]);
    }
    below += counts[i];
  }
  return bounds[bounds.length - 1];
}
