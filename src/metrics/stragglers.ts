/**
 * The straggler rule of the serving view: a backend that generates fewer tokens per second per
 * running request than STRAGGLER_RATIO of the fleet's median is marked. Per running request, so a
 * backend that is merely given less work is not taken for a slow one. Pure.
 *
 * The Prometheus alert `FleetgateBackendSlowTokens` (config/prometheus/alerts.yml) watches the same
 * symptom over 5 minutes with a 15-minute `for:`; this mark is the live, last-minute view of it.
 */

/** Below this share of the fleet's median tokens/s per running request, a backend is a straggler. */
export const STRAGGLER_RATIO = 0.7;
/**
 * A backend counts only if it held at least this many requests on average over the window: an idle
 * backend, or one that ran a single short request, says nothing about its speed. Below one, so that
 * a fleet with about one client per backend is still judged.
 */
const STRAGGLER_MIN_RUNNING = 0.5;

export interface ServingSample {
  name: string;
  tokensPerSecond: number;
  /** Mean running requests over the same window; null when unknown. */
  meanRunning: number | null;
}

/** Tokens/s per running request, or null when the backend does not count (too little traffic). */
export function tokensPerRequest(sample: ServingSample): number | null {
  if (sample.meanRunning === null || sample.meanRunning < STRAGGLER_MIN_RUNNING) return null;
  return sample.tokensPerSecond / sample.meanRunning;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Names of the stragglers; none unless at least two backends count (one has no peers to trail). */
export function findStragglers(samples: readonly ServingSample[]): Set<string> {
  const counted = samples.flatMap((s) => {
    const perRequest = tokensPerRequest(s);
    return perRequest === null ? [] : [{ name: s.name, perRequest }];
  });
  const stragglers = new Set<string>();
  if (counted.length < 2) return stragglers;
  const threshold = STRAGGLER_RATIO * median(counted.map((c) => c.perRequest));
  for (const c of counted) if (c.perRequest < threshold) stragglers.add(c.name);
  return stragglers;
}
