/**
 * Request-side series of one `backend` label value. The request path touches no prom-client label
 * lookup: the two histograms are fleetgate's own arrays (backend-histogram.ts), and the request and
 * token counts wait in plain numbers until Prometheus scrapes (`flush()`, from the families'
 * `collect`). Statuses and error kinds are bound on first use (a handful per backend).
 */
import type { Counter } from 'prom-client';
import type { RequestRecord } from '../proxy/proxy-events.js';
import type { HistogramSeries } from './backend-histogram.js';
import type { MetricFamilies } from './definitions.js';

export class RequestSeries {
  readonly #families: MetricFamilies;
  readonly #backend: string;
  #duration: HistogramSeries | null = null;
  #ttfb: HistogramSeries | null = null;
  readonly #tokens: Counter.Internal;
  readonly #retries: Counter.Internal;
  readonly #byCode = new Map<number, Counter.Internal>();
  readonly #byKind = new Map<string, Counter.Internal>();
  /** Requests per status and completion tokens counted since the last scrape. */
  readonly #unflushedByCode = new Map<number, number>();
  #unflushedTokens = 0;

  /** `zeroed`: export the series at 0 from the start, so `rate()` has a baseline before traffic. */
  constructor(families: MetricFamilies, backend: string, { zeroed }: { zeroed: boolean }) {
    this.#families = families;
    this.#backend = backend;
    const labels = { backend };
    this.#tokens = families.generatedTokens.labels(labels);
    this.#retries = families.retries.labels(labels);
    if (zeroed) {
      this.#duration = families.requestDuration.series(backend);
      this.#ttfb = families.timeToFirstByte.series(backend);
      this.#tokens.inc(0);
      this.#retries.inc(0);
    }
  }

  record(record: RequestRecord): void {
    const families = this.#families;
    this.#unflushedByCode.set(record.status, (this.#unflushedByCode.get(record.status) ?? 0) + 1);
    this.#duration ??= families.requestDuration.series(this.#backend);
    this.#duration.observe(record.durationMs / 1000);
    if (record.ttfbMs !== null) {
      this.#ttfb ??= families.timeToFirstByte.series(this.#backend);
      this.#ttfb.observe(record.ttfbMs / 1000);
    }
    if (record.completionTokens !== null && record.completionTokens > 0)
      this.#unflushedTokens += record.completionTokens;
  }

  /** Adds the counts since the last scrape to the counters. */
  flush(): void {
    for (const [status, count] of this.#unflushedByCode) {
      let requests = this.#byCode.get(status);
      if (requests === undefined) {
        requests = this.#families.requests.labels({ backend: this.#backend, code: String(status) });
        this.#byCode.set(status, requests);
      }
      requests.inc(count);
    }
    this.#unflushedByCode.clear();
    if (this.#unflushedTokens > 0) this.#tokens.inc(this.#unflushedTokens);
    this.#unflushedTokens = 0;
  }

  upstreamError(kind: string): void {
    let errors = this.#byKind.get(kind);
    if (errors === undefined) {
      errors = this.#families.upstreamErrors.labels({ backend: this.#backend, kind });
      this.#byKind.set(kind, errors);
    }
    errors.inc();
  }

  retry(): void {
    this.#retries.inc();
  }

  remove(): void {
    const f = this.#families;
    const backend = this.#backend;
    f.requestDuration.remove(backend);
    f.timeToFirstByte.remove(backend);
    f.generatedTokens.remove({ backend });
    f.retries.remove({ backend });
    for (const code of this.#byCode.keys()) f.requests.remove({ backend, code: String(code) });
    for (const kind of this.#byKind.keys()) f.upstreamErrors.remove({ backend, kind });
  }
}
