/**
 * bench:balance's issue #29 figures: two fleetgate replicas against one (makespan), and a fixed
 * `max_inflight_per_backend` held fleet-wide by two replicas: the most requests any server held at
 * once against the cap, and against what one load-report interval lets through (each replica sees
 * another's requests end only at its next scrape, so within one interval both may fill the same
 * freed slots).
 */
import { median } from '../lib/stats.js';
import type { BalanceRecord } from './report.js';
import { BALANCE_TARGETS, FIXED_CAP } from './targets.js';

/** fleetgate's default `routing.load_interval`, ms. */
const LOAD_INTERVAL_MS = 250;

const nameOf = (id: string) => BALANCE_TARGETS.find((t) => t.id === id)?.name ?? id;

function withinRun(records: BalanceRecord[], a: string, b: string, f: (r: BalanceRecord) => number): number[] {
  const out: number[] = [];
  for (const run of new Set(records.map((r) => r.run))) {
    const x = records.find((r) => r.run === run && r.target === a && r.metrics !== null);
    const y = records.find((r) => r.run === run && r.target === b && r.metrics !== null);
    if (x && y) out.push(f(x) / f(y));
  }
  return out;
}

export interface ReplicaFigures {
  makespanRatio: number | null;
  makespanRatios: number[];
  cap: number;
  /** Per run with the fixed cap and 2 replicas: the largest per-server peak, and one interval's completions per server. */
  capRuns: Array<{
    run: number;
    target: string;
    peak: number;
    overshoot: number;
    perInterval: number;
    singlePeak: number | null;
  }>;
}

export function replicaFigures(records: BalanceRecord[]): ReplicaFigures {
  const makespan = (r: BalanceRecord) => r.metrics?.makespanSec ?? Number.NaN;
  const ratios = withinRun(records, nameOf('fleetgate-replicas-2'), nameOf('fleetgate-least-loaded'), makespan);
  const capRuns: ReplicaFigures['capRuns'] = [];
  const capped = [nameOf('fleetgate-cap-fixed-replicas-2'), nameOf('fleetgate-cap-shared-replicas-2')];
  for (const r of records) {
    if (!capped.includes(r.target) || r.metrics === null) continue;
    const m = r.metrics;
    const peak = Math.max(...m.peakHeld);
    // Requests a server completes (and so admits) per load interval, at the job's mean pace.
    const perServer = m.completed.reduce((a, b) => a + b, 0) / m.completed.length;
    const perInterval = (perServer / m.makespanSec) * (LOAD_INTERVAL_MS / 1000);
    const single = records.find((x) => x.run === r.run && x.target === nameOf('fleetgate-cap-fixed') && x.metrics);
    capRuns.push({
      run: r.run,
      target: r.target,
      peak,
      overshoot: peak - FIXED_CAP,
      perInterval,
      singlePeak: single?.metrics ? Math.max(...single.metrics.peakHeld) : null,
    });
  }
  return { makespanRatio: ratios.length > 0 ? median(ratios) : null, makespanRatios: ratios, cap: FIXED_CAP, capRuns };
}

export function renderReplicaFigures(f: ReplicaFigures): string {
  const lines = ['### issue #29 targets: several replicas', ''];
  if (f.makespanRatio !== null) {
    const met = f.makespanRatio <= 1.03;
    lines.push(
      `- 2 replicas / 1 replica, makespan: ${f.makespanRatio.toFixed(3)}x (${f.makespanRatios.map((x) => x.toFixed(3)).join(' / ')}); target <= 1.03: ${met ? 'met' : '**not met**'}.`,
    );
  }
  for (const c of f.capRuns) {
    const within = c.overshoot <= Math.ceil(c.perInterval);
    // A job that opens with every request at once: the whole burst arrives within the first interval.
    lines.push(
      `- ${c.target}, run ${c.run}: the busiest server held at most ${c.peak} at once (one replica: ${c.singlePeak ?? '-'}); over the cap by ${c.overshoot}, against ${c.perInterval.toFixed(1)} requests a server admits per ${LOAD_INTERVAL_MS} ms load interval: ${within ? 'within' : '**beyond**'} one interval's arrivals.`,
    );
  }
  return lines.join('\n');
}
