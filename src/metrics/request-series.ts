/**
 * Request-side series of one `backend` label value: label children bound once, when the backend is
 * added, so the request path only increments. Statuses and error kinds are bound on first use (a
 * handful per backend).
 */
import type { Counter, Histogram } from 'prom-client';
import type { RequestRecord } from '../proxy/request-record.js';
import type { MetricFamilies } from './definitions.js';

export class RequestSeries {
  readonly #families: MetricFamilies;
  readonly #backend: string;
  readonly #duration: Histogram.Internal<'backend'>;
  readonly #ttfb: Histogram.Internal<'backend'>;
  readonly #tokens: Counter.Internal;
  readonly #retries: Counter.Internal;
  readonly #byCode = new Map<number, Counter.Internal>();
  readonly #byKind = new Map<string, Counter.Internal>();

  /** `zeroed`: export the series at 0 from the start, so `rate()` has a baseline before traffic. */
  constructor(families: MetricFamilies, backend: string, { zeroed }: { zeroed: boolean }) {
    this.#families = families;
    this.#backend = backend;
    const labels = { backend };
    this.#duration = families.requestDuration.labels(labels);
    this.#ttfb = families.timeToFirstByte.labels(labels);
    this.#tokens = families.generatedTokens.labels(labels);
    this.#retries = families.retries.labels(labels);
    if (zeroed) {
      families.requestDuration.zero(labels);
      families.timeToFirstByte.zero(labels);
      this.#tokens.inc(0);
      this.#retries.inc(0);
    }
  }

  record(record: RequestRecord): void {
    let requests = this.#byCode.get(record.status);
    if (requests === undefined) {
      requests = this.#families.requests.labels({ backend: this.#backend, code: String(record.status) });
      this.#byCode.set(record.status, requests);
    }
    requests.inc();
    this.#duration.observe(record.durationMs / 1000);
    if (record.ttfbMs !== null) this.#ttfb.observe(record.ttfbMs / 1000);
    if (record.completionTokens !== null && record.completionTokens > 0) this.#tokens.inc(record.completionTokens);
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
    f.requestDuration.remove({ backend });
    f.timeToFirstByte.remove({ backend });
    f.generatedTokens.remove({ backend });
    f.retries.remove({ backend });
    for (const code of this.#byCode.keys()) f.requests.remove({ backend, code: String(code) });
    for (const kind of this.#byKind.keys()) f.upstreamErrors.remove({ backend, kind });
  }
}
