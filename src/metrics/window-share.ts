/**
 * The share of one histogram's sum in another's over the last minute, for the serving view (a
 * backend's thinking share: its reasoning tokens over its output tokens): both sums are copied
 * once a second, and the share is read from the difference between the newest copies and the
 * oldest ones still in the window, as `rate(part_sum) / rate(whole_sum)` reads in Prometheus.
 * Pure: every call takes the time.
 */
import { SERVING_WINDOW_MS } from './rate-window.js';

/** What is read of a histogram series (backend-histogram.ts's HistogramSeries). */
export interface HistogramSum {
  readonly sum: number;
}

interface Snapshot {
  at: number;
  part: number;
  whole: number;
}

export class WindowShare {
  readonly #part: HistogramSum;
  readonly #whole: HistogramSum;
  readonly #windowMs: number;
  readonly #snapshots: Snapshot[] = [];

  constructor(part: HistogramSum, whole: HistogramSum, windowMs = SERVING_WINDOW_MS) {
    this.#part = part;
    this.#whole = whole;
    this.#windowMs = windowMs;
  }

  /** Copies both sums as they are at `now`; the oldest copies beyond the window are dropped. */
  sample(now: number): void {
    const snapshots = this.#snapshots;
    snapshots.push({ at: now, part: this.#part.sum, whole: this.#whole.sum });
    // One copy at or before the window's start stays: the baseline the window is read against.
    while (snapshots.length > 2 && snapshots[1].at <= now - this.#windowMs) snapshots.shift();
  }

  /** part / whole of what was added in the window; null when the whole grew by nothing (or before two copies). */
  share(): number | null {
    const snapshots = this.#snapshots;
    if (snapshots.length < 2) return null;
    const from = snapshots[0];
    const to = snapshots[snapshots.length - 1];
    const whole = to.whole - from.whole;
    if (whole <= 0) return null;
    return Math.min(1, Math.max(0, (to.part - from.part) / whole));
  }
}
