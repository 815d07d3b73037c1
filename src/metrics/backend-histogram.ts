/**
 * A histogram family labelled by `backend` (and optionally a few more labels bound with the series),
 * for the ones observed on every proxied request or every generated token.
 * prom-client's `observe` hashes the labels into a string key and looks up each bucket by its bound
 * turned into a string, on every call, which showed in a small request's CPU in fleetgate
 * (docs/benchmarks.md, bench:overhead). Here a series is an array bound when the backend is added, and
 * an observation is a bucket scan and three additions. Rendering stays prom-client's: the registry
 * formats what `get()` returns, in the shape prom-client's own Histogram returns it.
 */
import type { Metric, Registry } from 'prom-client';

export class HistogramSeries {
  /** Upper bounds of the buckets, ascending (`+Inf` not among them). */
  readonly bounds: readonly number[];
  /** Per bucket, not cumulative: observations in (bounds[i-1], bounds[i]]. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(bounds: readonly number[]) {
    this.bounds = bounds;
    this.counts = new Float64Array(bounds.length);
  }

  /** `times` observations of `value` (one bucket scan). */
  observe(value: number, times = 1): void {
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]) i++;
    if (i < bounds.length) this.counts[i] += times;
    this.sum += value * times;
    this.count += times;
  }
}

interface RenderedValue {
  value: number;
  labels: Record<string, string | number>;
  metricName: string;
}

/** One series: its labels beyond `backend` (e.g. `model`, `stream`) and its counts. */
interface LabelledSeries {
  backend: string;
  labels: Readonly<Record<string, string>>;
  series: HistogramSeries;
}

export class BackendHistogram {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #bounds: readonly number[];
  /** Keyed by the backend and the other labels' values. */
  readonly #series = new Map<string, LabelledSeries>();

  constructor(opts: { name: string; help: string; buckets: readonly number[]; registers: Registry[] }) {
    this.name = opts.name;
    this.help = opts.help;
    this.#bounds = [...opts.buckets].sort((a, b) => a - b);
    // The registry needs only `name` and `get()` (and `reset()` for resetMetrics); its type lists
    // prom-client's own four classes.
    for (const registry of opts.registers) registry.registerMetric(this as unknown as Metric);
  }

  /**
   * The series of the backend (and `labels`, the same names on every series of the family),
   * created at zero, so it is exported before its first observation, on first use.
   */
  series(backend: string, labels: Readonly<Record<string, string>> = NO_LABELS): HistogramSeries {
    const key = labels === NO_LABELS ? backend : `${backend}\u0000${Object.values(labels).join('\u0000')}`;
    let entry = this.#series.get(key);
    if (entry === undefined) {
      entry = { backend, labels, series: new HistogramSeries(this.#bounds) };
      this.#series.set(key, entry);
    }
    return entry.series;
  }

  /** Drops every series of the backend. */
  remove(backend: string): void {
    for (const [key, entry] of this.#series) if (entry.backend === backend) this.#series.delete(key);
  }

  reset(): void {
    this.#series.clear();
  }

  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: RenderedValue[] }> {
    const values: RenderedValue[] = [];
    const bucket = `${this.name}_bucket`;
    for (const { backend, labels: extra, series } of this.#series.values()) {
      const labels = { backend, ...extra };
      let cumulative = 0;
      for (let i = 0; i < this.#bounds.length; i++) {
        cumulative += series.counts[i];
        values.push({ value: cumulative, labels: { le: this.#bounds[i], ...labels }, metricName: bucket });
      }
      values.push({ value: series.count, labels: { le: '+Inf', ...labels }, metricName: bucket });
      values.push({ value: series.sum, labels, metricName: `${this.name}_sum` });
      values.push({ value: series.count, labels, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}

const NO_LABELS: Readonly<Record<string, string>> = Object.freeze({});
