/**
 * The token-latency histograms (definitions.ts: time to first token, to the first answer token,
 * inter-token latency, time per output token, output and reasoning tokens), by backend and the
 * model it serves. The proxy's TokenClock asks
 * for a backend's series once per request (and once per resume); the series are fleetgate's own
 * arrays (backend-histogram.ts), bound here, so an observation is a bucket scan.
 */
import type { Backend, FleetRegistry } from '../fleet/registry.js';
import type { TokenObserver, TokenSeries } from '../proxy/token-timing.js';
import type { HistogramSeries } from './backend-histogram.js';
import type { MetricFamilies } from './definitions.js';

/** `model` of a backend whose model is not known yet. */
const UNKNOWN_MODEL = 'unknown';

/**
 * A backend's series the serving view reads: two latencies (window-quantile.ts) and the output and
 * reasoning token counts whose sums give its thinking share (window-share.ts).
 */
export interface LatencySeries {
  readonly firstToken: HistogramSeries;
  readonly interToken: HistogramSeries;
  readonly outputTokens: HistogramSeries;
  readonly reasoningTokens: HistogramSeries;
}

class BoundTokenSeries implements TokenSeries {
  readonly #ttftStream: HistogramSeries;
  readonly #ttftWhole: HistogramSeries;
  readonly #firstAnswer: HistogramSeries;
  readonly #interToken: HistogramSeries;
  readonly #perToken: HistogramSeries;
  readonly #tokens: HistogramSeries;
  readonly #reasoning: HistogramSeries;

  constructor(families: MetricFamilies, backend: string, model: string) {
    const labels = { model };
    this.#ttftStream = families.timeToFirstToken.series(backend, { model, stream: 'true' });
    this.#ttftWhole = families.timeToFirstToken.series(backend, { model, stream: 'false' });
    this.#firstAnswer = families.timeToFirstAnswerToken.series(backend, labels);
    this.#interToken = families.interTokenLatency.series(backend, labels);
    this.#perToken = families.timePerOutputToken.series(backend, labels);
    this.#tokens = families.outputTokens.series(backend, labels);
    this.#reasoning = families.reasoningTokens.series(backend, labels);
  }

  get latency(): LatencySeries {
    return {
      firstToken: this.#ttftStream,
      interToken: this.#interToken,
      outputTokens: this.#tokens,
      reasoningTokens: this.#reasoning,
    };
  }

  firstToken(stream: boolean, seconds: number): void {
    (stream ? this.#ttftStream : this.#ttftWhole).observe(seconds);
  }

  firstAnswer(seconds: number): void {
    this.#firstAnswer.observe(seconds);
  }

  interToken(seconds: number, count: number): void {
    this.#interToken.observe(seconds, count);
  }

  finished(tokens: number, secondsPerToken: number | null): void {
    this.#tokens.observe(tokens);
    if (secondsPerToken !== null) this.#perToken.observe(secondsPerToken);
  }

  reasoned(tokens: number): void {
    this.#reasoning.observe(tokens);
  }
}

export class TokenMetrics implements TokenObserver {
  readonly #families: MetricFamilies;
  readonly #fleet: FleetRegistry;
  readonly #bound = new Map<string, BoundTokenSeries>();

  constructor(families: MetricFamilies, fleet: FleetRegistry) {
    this.#families = families;
    this.#fleet = fleet;
    fleet.on('models', this.#forget);
    fleet.on('removed', this.#forget);
  }

  close(): void {
    this.#fleet.off('models', this.#forget);
    this.#fleet.off('removed', this.#forget);
  }

  /** The backend's series the serving view reads; undefined for one not in the fleet. */
  latencyOf(name: string): LatencySeries | undefined {
    return this.seriesOf(name)?.latency;
  }

  /** Undefined for a backend no longer in the fleet: its series are gone and stay gone. */
  seriesOf(name: string): BoundTokenSeries | undefined {
    let series = this.#bound.get(name);
    if (series !== undefined) return series;
    const backend = this.#fleet.get(name);
    if (backend === undefined) return undefined;
    series = new BoundTokenSeries(this.#families, name, backend.model ?? UNKNOWN_MODEL);
    this.#bound.set(name, series);
    return series;
  }

  /** A backend left, or serves another model: its series go (rebound with the new model on next use). */
  readonly #forget = (backend: Backend): void => {
    const name = backend.name;
    if (!this.#bound.delete(name)) return;
    const f = this.#families;
    const families = [
      f.timeToFirstToken,
      f.timeToFirstAnswerToken,
      f.interTokenLatency,
      f.timePerOutputToken,
      f.outputTokens,
      f.reasoningTokens,
    ];
    for (const family of families) {
      family.remove(name);
    }
  };
}
