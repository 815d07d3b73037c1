/**
 * How far a batch is: done/total, requests/s and tokens/s over the last `windowMs`, an ETA from that
 * rate, the fleet's ready backends and the errors so far. Counting and formatting only (the clock is
 * injected); `progress-reporter.ts` decides where and how often it is printed.
 */

export interface ProgressSnapshot {
  /** Written to the output file (this run and earlier ones). */
  done: number;
  total: number;
  /** Written to the errors file this run. */
  failed: number;
  retries: number;
  requests_per_second: number;
  tokens_per_second: number;
  /** Seconds left at the current rate; null before a rate is known. */
  eta_seconds: number | null;
  ready: number | null;
  backends: number | null;
  elapsed_seconds: number;
}

interface Sample {
  at: number;
  done: number;
  tokens: number;
}

export class BatchProgress {
  readonly total: number;
  #done: number;
  #failed = 0;
  #retries = 0;
  #tokens = 0;
  #samples: Sample[] = [];
  readonly #now: () => number;
  readonly #windowMs: number;
  readonly #startedAt: number;
  #fleet: { ready: number; total: number } | null = null;

  /** `alreadyDone`: lines a previous run wrote. */
  constructor(total: number, alreadyDone: number, { now = Date.now, windowMs = 10_000 } = {}) {
    this.total = total;
    this.#done = alreadyDone;
    this.#now = now;
    this.#windowMs = windowMs;
    this.#startedAt = now();
    this.#samples.push({ at: this.#startedAt, done: alreadyDone, tokens: 0 });
  }

  completed(tokens: number): void {
    this.#done++;
    this.#tokens += tokens;
  }

  failed(): void {
    this.#done++;
    this.#failed++;
  }

  retried(): void {
    this.#retries++;
  }

  fleet(ready: number, total: number): void {
    this.#fleet = { ready, total };
  }

  snapshot(): ProgressSnapshot {
    const at = this.#now();
    this.#samples.push({ at, done: this.#done, tokens: this.#tokens });
    while (this.#samples.length > 2 && at - this.#samples[1].at >= this.#windowMs) this.#samples.shift();
    const first = this.#samples[0];
    const seconds = (at - first.at) / 1000;
    const rps = seconds > 0 ? (this.#done - first.done) / seconds : 0;
    const tps = seconds > 0 ? (this.#tokens - first.tokens) / seconds : 0;
    const left = this.total - this.#done;
    return {
      done: this.#done,
      total: this.total,
      failed: this.#failed,
      retries: this.#retries,
      requests_per_second: round(rps),
      tokens_per_second: round(tps),
      eta_seconds: left === 0 ? 0 : rps > 0 ? Math.round(left / rps) : null,
      ready: this.#fleet?.ready ?? null,
      backends: this.#fleet?.total ?? null,
      elapsed_seconds: round((at - this.#startedAt) / 1000),
    };
  }
}

function round(n: number): number {
  return Math.round(n * 10) / 10;
}

function formatDuration(seconds: number | null): string {
  if (seconds === null) return '?';
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** `1234/5000 24.7% | 85.3 req/s | 4321 tok/s | ETA 44s | ready 6/7 | errors 0` */
export function progressLine(p: ProgressSnapshot): string {
  const pct = p.total === 0 ? 100 : (100 * p.done) / p.total;
  const ready = p.ready === null ? '?' : `${p.ready}/${p.backends}`;
  return [
    `${p.done}/${p.total} ${pct.toFixed(1)}%`,
    `${p.requests_per_second} req/s`,
    `${Math.round(p.tokens_per_second)} tok/s`,
    `ETA ${formatDuration(p.eta_seconds)}`,
    `ready ${ready}`,
    `errors ${p.failed}`,
  ].join(' | ');
}

/** A bar `[#####-----]` of `width` cells before the line, for a terminal. */
export function progressBar(p: ProgressSnapshot, width = 24): string {
  const filled = p.total === 0 ? width : Math.min(width, Math.floor((width * p.done) / p.total));
  return `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${progressLine(p)}`;
}
