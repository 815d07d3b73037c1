/** Tables and the targets for the balance bench. */
import { median } from '../lib/stats.js';
import { fmt, markdownTable } from '../lib/table.js';
import type { JobMetrics } from './job.js';

export interface BalanceRecord {
  run: number;
  target: string;
  metrics: JobMetrics | null;
  error: string | null;
}

export interface TargetSummary {
  target: string;
  runs: number;
  makespanSec: number;
  lbRatio: number;
  p50Sec: number;
  p99Sec: number;
  retractions: number;
  errors: number;
  /** Median share of completed requests per server. */
  shares: number[];
  tokensPerSec: number;
}

export function summarize(records: BalanceRecord[], target: string, lbSeconds: number): TargetSummary | null {
  const runs = records.filter((r) => r.target === target && r.metrics).map((r) => r.metrics as JobMetrics);
  if (runs.length === 0) return null;
  const m = (f: (x: JobMetrics) => number) => median(runs.map(f));
  const servers = runs[0].completed.length;
  const shares = Array.from({ length: servers }, (_, i) =>
    m(
      (x) =>
        x.completed[i] /
        Math.max(
          1,
          x.completed.reduce((a, b) => a + b, 0),
        ),
    ),
  );
  return {
    target,
    runs: runs.length,
    makespanSec: m((x) => x.makespanSec),
    lbRatio: m((x) => x.makespanSec) / lbSeconds,
    p50Sec: m((x) => x.p50Sec),
    p99Sec: m((x) => x.p99Sec),
    retractions: m((x) => x.retractions),
    errors: m((x) => x.errors),
    shares,
    tokensPerSec: m((x) => x.generatedTokens / x.makespanSec),
  };
}

export function renderTable(summaries: TargetSummary[], records: BalanceRecord[], slowIndex: number): string {
  const failed = (t: string) => records.filter((r) => r.target === t && r.error !== null).length;
  const servers = summaries[0]?.shares.length ?? 0;
  const shareHeader = Array.from({ length: servers }, (_, i) => (i === slowIndex ? `${i}*` : String(i))).join('/');
  return markdownTable(
    [
      'target',
      'makespan s',
      'vs LB',
      'p50 s',
      'p99 s',
      'KV retractions',
      'errors',
      'tokens/s',
      `share per backend % (${shareHeader})`,
    ],
    summaries.map((s) => [
      s.target + (failed(s.target) > 0 ? ` (${failed(s.target)} run(s) failed)` : ''),
      fmt(s.makespanSec, 2),
      `${s.lbRatio.toFixed(2)}x`,
      fmt(s.p50Sec, 2),
      fmt(s.p99Sec, 2),
      fmt(s.retractions, 0),
      fmt(s.errors, 0),
      fmt(s.tokensPerSec, 0),
      s.shares.map((x) => (x * 100).toFixed(1)).join(' / '),
    ]),
  );
}

export interface BalanceCheck {
  target: string;
  value: string;
  met: boolean | null;
}

const FLEETGATE_DEFAULT = 'fleetgate least-loaded';
const PEERS = ['nginx least_conn', 'haproxy leastconn'];

/** `name`'s makespan over the best of `others` in each run where both ran. */
export interface VersusBest {
  ratios: number[];
  /** Runs where `name` was at least as fast as the best of the others, and strictly faster. */
  wins: number;
  strict: number;
}

export function versusBest(records: BalanceRecord[], name: string, others: readonly string[]): VersusBest {
  const out: VersusBest = { ratios: [], wins: 0, strict: 0 };
  const makespan = (run: number, target: string) =>
    records.find((r) => r.run === run && r.target === target && r.metrics)?.metrics?.makespanSec;
  for (const run of new Set(records.map((r) => r.run))) {
    const own = makespan(run, name);
    const peers = others.map((other) => makespan(run, other)).filter((x): x is number => x !== undefined);
    if (own === undefined || peers.length === 0) continue;
    const best = Math.min(...peers);
    out.ratios.push(own / best);
    if (own <= best) out.wins++;
    if (own < best) out.strict++;
  }
  return out;
}

const describe = (v: VersusBest) =>
  `${median(v.ratios).toFixed(4)}x of best peer (median of runs); <= in ${v.wins}/${v.ratios.length} runs, < in ${v.strict}/${v.ratios.length}`;

/** Per run: fleetgate's makespan against the better of NGINX least_conn and HAProxy leastconn in that same run. */
export function checkTargets(
  records: BalanceRecord[],
  fault: boolean,
  fleetgateNames: string[],
  kvPressure: boolean,
): BalanceCheck[] {
  const checks: BalanceCheck[] = [];
  if (!fault) {
    for (const name of fleetgateNames) {
      const v = versusBest(records, name, PEERS);
      const compared = v.ratios.length;
      const relation = kvPressure ? '<' : '<=';
      checks.push({
        target: `${name}${name === FLEETGATE_DEFAULT ? ' (default policy)' : ''}: makespan ${relation} better of nginx least_conn / haproxy leastconn in the same run${kvPressure ? ' (KV pressure: strictly better)' : ''}`,
        value: compared === 0 ? 'not measured' : describe(v),
        // The measure: the ratio within each run, its median over the runs (at least 3).
        met: compared < 3 ? null : kvPressure ? median(v.ratios) < 1 : median(v.ratios) <= 1,
      });
    }
  } else {
    for (const name of fleetgateNames) {
      const errors = records.filter((r) => r.target === name && r.metrics).map((r) => r.metrics?.errors ?? 0);
      checks.push({
        target: `${name}: 0 client-visible errors with a late start and a crash`,
        value: errors.length === 0 ? 'not measured' : `errors per run: ${errors.join(', ')}`,
        met: errors.length === 0 ? null : errors.every((e) => e === 0),
      });
    }
  }
  return checks;
}

/**
 * The same measure for each of fleetgate's default, NGINX least_conn and HAProxy leastconn against
 * the better of the other two: what the issue's check gives a balancer that only ties. With run to
 * run noise, the faster of two others' runs beats a third's typical run, so a tie scores above 1x.
 */
export function eachAgainstTheOthers(records: BalanceRecord[]): string | null {
  const names = [FLEETGATE_DEFAULT, ...PEERS].filter((name) => records.some((r) => r.target === name && r.metrics));
  if (names.length < 3) return null;
  return markdownTable(
    ['balancer', 'makespan vs the better of the other two'],
    names.map((name) => [
      name,
      describe(
        versusBest(
          records,
          name,
          names.filter((other) => other !== name),
        ),
      ),
    ]),
  );
}

export function renderChecks(checks: BalanceCheck[]): string {
  return markdownTable(
    ['issue target', 'measured', 'met'],
    checks.map((c) => [c.target, c.value, c.met === null ? '—' : c.met ? 'yes' : 'NO']),
  );
}

/**
 * The scheduler-dead variant: what the client saw per balancer, every run listed (the medians hide
 * a run that hung). Errors exclude the requests the time limits cut, counted as never completed.
 */
export function renderSchedulerDeadTable(records: BalanceRecord[], targets: string[]): string {
  const rows = targets.map((target) => {
    const runs = records.filter((r) => r.target === target);
    const ok = runs.filter((r) => r.metrics !== null).map((r) => r.metrics as JobMetrics);
    const each = (f: (x: JobMetrics) => number, digits = 0) => ok.map((x) => f(x).toFixed(digits)).join(' / ');
    const errors = (x: JobMetrics) => x.errors - x.neverCompleted;
    return [
      target,
      ok.length === 0 ? '-' : median(ok.map((x) => x.makespanSec)).toFixed(1),
      each((x) => x.makespanSec, 1),
      ok.length === 0 ? '-' : String(median(ok.map(errors))),
      each(errors),
      ok.length === 0 ? '-' : String(median(ok.map((x) => x.neverCompleted))),
      each((x) => x.neverCompleted),
      String(runs.length - ok.length),
    ];
  });
  return markdownTable(
    [
      'target',
      'makespan s (median)',
      'makespan s (each run)',
      'client-visible errors (median)',
      'errors (each run)',
      'never completed (median)',
      'never completed (each run)',
      'failed runs',
    ],
    rows,
  );
}
