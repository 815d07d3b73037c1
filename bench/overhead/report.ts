/** Tables (medians of runs, ratios to HAProxy / NGINX / direct) and the issue's targets for the overhead bench. */
import { median } from '../lib/stats.js';
import { fmt, markdownTable, pct, times } from '../lib/table.js';
import type { Metrics, ScenarioId, Sizes } from './scenarios.js';

export interface RunRecord {
  scenario: ScenarioId;
  run: number;
  target: string;
  metrics: Metrics | null;
  error: string | null;
}

export type Medians = Partial<Record<ScenarioId, Record<string, Metrics>>>;

/** [scenario, metric, peer, name]: `name` = median over runs of the metric's ratio to the peer's in that run. */
const COMPARISONS: [ScenarioId, string, string, string][] = [
  ['a', 'cpuPer1kReq', 'haproxy', 'cpuVsHaproxy'],
  ['a', 'cpuPer1kReq', 'nginx', 'cpuVsNginx'],
  ['a', 'reqPerSec', 'direct', 'rateVsDirect'],
  ['a', 'cpuPer1kReq', 'fastify-floor', 'cpuVsFastifyFloor'],
  ['a-cpu', 'cpuPer1kReq', 'fastify-floor', 'cpuVsFastifyFloor'],
  ['a-cpu', 'cpuPer1kReq', 'haproxy', 'cpuVsHaproxy'],
  ['a-cpu', 'cpuPer1kReq', 'nginx', 'cpuVsNginx'],
  ['b', 'cpuPer100kChunks', 'haproxy', 'cpuVsHaproxy'],
  ['b', 'cpuPer100kChunks', 'nginx', 'cpuVsNginx'],
  ['b', 'chunksPerSec', 'direct', 'rateVsDirect'],
  ['b', 'ttfcP50Ms', 'fastify-floor', 'ttfcVsFastifyFloor'],
  ['b-cpu', 'ttfcP50Ms', 'fastify-floor', 'ttfcVsFastifyFloor'],
  ['b-cpu', 'cpuPer100kChunks', 'haproxy', 'cpuVsHaproxy'],
  ['b-cpu', 'cpuPer100kChunks', 'fastify-floor', 'cpuVsFastifyFloor'],
  ['b-cpu', 'cpuPer100kChunks', 'nginx', 'cpuVsNginx'],
  ['c', 'chunksPerSec', 'nginx', 'rateVsNginx'],
  ['c', 'cpuPer100kChunks', 'haproxy', 'cpuVsHaproxy'],
  // Issue #41: against the build before token latency and traces, and this build with its histograms off.
  ['a-cpu', 'cpuPer1kReq', 'fleetgate-before', 'cpuVsBefore'],
  ['b-cpu', 'cpuPer100kChunks', 'fleetgate-before', 'cpuVsBefore'],
  ['a-cpu', 'cpuPer1kReq', 'fleetgate-no-token-latency', 'cpuVsNoTokenLatency'],
  ['b-cpu', 'cpuPer100kChunks', 'fleetgate-no-token-latency', 'cpuVsNoTokenLatency'],
  // A difference, not a ratio: time added to the first chunk over direct.
  ['d', 'ttfcP50Ms', 'direct', 'addedTtfcMs'],
];

/**
 * Per scenario and target, the median of each metric over the runs that succeeded, and the
 * COMPARISONS with other targets.
 */
export function mediansOf(records: RunRecord[]): Medians {
  const out: Medians = {};
  const groups = new Map<string, Metrics[]>();
  for (const r of records) {
    if (!r.metrics) continue;
    const key = `${r.scenario}\u0000${r.target}`;
    groups.set(key, [...(groups.get(key) ?? []), r.metrics]);
  }
  for (const [key, runs] of groups) {
    const [scenario, target] = key.split('\u0000') as [ScenarioId, string];
    const m: Metrics = {};
    for (const name of Object.keys(runs[0])) m[name] = median(runs.map((r) => r[name]));
    out[scenario] = { ...(out[scenario] ?? {}), [target]: m };
  }
  // Comparisons between targets are taken within each run (targets of one run ran minutes apart,
  // runs may not), then the median over the runs: the figure that survives a machine whose speed drifts.
  for (const [scenario, metric, peer, name] of COMPARISONS) {
    const byTarget = out[scenario];
    if (!byTarget?.[peer]) continue;
    for (const target of Object.keys(byTarget)) {
      const values: number[] = [];
      for (const r of records) {
        if (r.scenario !== scenario || r.target !== target || !r.metrics) continue;
        const other = records.find((x) => x.scenario === scenario && x.run === r.run && x.target === peer)?.metrics;
        if (!other) continue;
        const value = name === 'addedTtfcMs' ? r.metrics[metric] - other[metric] : r.metrics[metric] / other[metric];
        if (Number.isFinite(value)) values.push(value);
      }
      if (values.length > 0) byTarget[target][name] = median(values);
    }
  }
  return out;
}

function failures(records: RunRecord[], scenario: ScenarioId, target: string): string {
  const failed = records.filter((r) => r.scenario === scenario && r.target === target && r.error !== null).length;
  return failed > 0 ? ` (${failed} run(s) failed)` : '';
}

const TOGETHER_NOTE =
  'Every proxy ran at once, pinned to the same core, the client sending requests to them in turn: ' +
  'each served the same number of requests at the same pace, with at most the concurrency in flight, ' +
  'and the machine drifting in speed moved all alike.';

/** A column: its header and how one target's medians fill it. */
type Column = [header: string, cell: (m: Metrics, target: string) => string];

const cpuColumns = (metric: string, per: string): Column[] => [
  [`proxy CPU s / ${per}`, (m) => fmt(m[metric], 3)],
  ['CPU vs HAProxy', (m) => times(m.cpuVsHaproxy)],
];
const loadColumns: Column[] = [
  ['core 1 busy', (m) => pct(m.core1Busy)],
  ['other load', (m) => pct(m.otherCores)],
];
const errorsColumn: Column = ['errors', (m) => fmt(m.errors, 0)];
const rssColumn: Column = ['RSS after MB', (m) => fmt(m.rssMB, 0)];

const NON_STREAMED: Column[] = [
  ['req/s', (m) => fmt(m.reqPerSec, 0)],
  ['p50 ms', (m) => fmt(m.p50Ms, 2)],
  ['p99 ms', (m) => fmt(m.p99Ms, 2)],
  ...cpuColumns('cpuPer1kReq', '1k req'),
  ['CPU vs NGINX', (m) => times(m.cpuVsNginx)],
  ['CPU vs fastify floor', (m) => times(m.cpuVsFastifyFloor)],
  ['CPU vs fleetgate-no-token-latency', (m) => times(m.cpuVsNoTokenLatency)],
  ['req/s vs direct', (m) => times(m.rateVsDirect)],
  rssColumn,
  ...loadColumns,
  errorsColumn,
];

const STREAMED: Column[] = [
  ['chunks/s', (m) => fmt(m.chunksPerSec, 0)],
  ['TTFC p50 ms', (m) => fmt(m.ttfcP50Ms, 2)],
  ['TTFC p99 ms', (m) => fmt(m.ttfcP99Ms, 2)],
  ...cpuColumns('cpuPer100kChunks', '100k chunks'),
  ['CPU vs NGINX', (m) => times(m.cpuVsNginx)],
  ['CPU vs fastify floor', (m) => times(m.cpuVsFastifyFloor)],
  ['CPU vs fleetgate-no-token-latency', (m) => times(m.cpuVsNoTokenLatency)],
  ['chunks/s vs direct', (m) => times(m.rateVsDirect)],
  rssColumn,
  ...loadColumns,
  errorsColumn,
];

const PACED: Column[] = [
  ['chunks/s', (m) => fmt(m.chunksPerSec, 0)],
  ['share of expected', (m) => pct(m.rateShare, 1)],
  ['rate vs NGINX', (m) => times(m.rateVsNginx)],
  ['gap p50 ms', (m) => fmt(m.gapP50Ms, 1)],
  ['gap p99 ms', (m) => fmt(m.gapP99Ms, 1)],
  ['proxy peak RSS MB', (m) => fmt(m.peakRssMB, 1)],
  ...cpuColumns('cpuPer100kChunks', '100k chunks'),
  ...loadColumns,
  errorsColumn,
];

const FIRST_CHUNK: Column[] = [
  ['TTFC p50 ms', (m) => fmt(m.ttfcP50Ms, 3)],
  ['TTFC p90 ms', (m) => fmt(m.ttfcP90Ms, 3)],
  ['added p50 vs direct ms', (m, target) => (target === 'direct' ? '—' : fmt(m.addedTtfcMs, 3))],
  errorsColumn,
];

export function renderTables(medians: Medians, targets: string[], records: RunRecord[], sizes: Sizes): string {
  const parts: string[] = [];
  const table = (id: ScenarioId, heading: string, columns: Column[]) => {
    const m = medians[id];
    if (!m) return;
    const rows = targets
      .filter((t) => m[t])
      .map((t) => [t + failures(records, id, t), ...columns.map(([, cell]) => cell(m[t], t))]);
    parts.push(`${heading}\n\n${markdownTable(['target', ...columns.map(([header]) => header)], rows)}`);
  };
  table(
    'a',
    `### (a) non-streamed small requests, concurrency ${sizes.concurrency}, ${sizes.requests} requests per run`,
    NON_STREAMED,
  );
  table(
    'a-cpu',
    `### (a-cpu) the load of (a) on every proxy at once: concurrency ${sizes.concurrency} and ${sizes.requests} requests per proxy\n\n${TOGETHER_NOTE}`,
    NON_STREAMED,
  );
  table(
    'b',
    `### (b) ${sizes.streams} concurrent SSE streams of ${sizes.chunks} tokens at full speed, ${sizes.streams * sizes.rounds} streams per run`,
    STREAMED,
  );
  table(
    'b-cpu',
    `### (b-cpu) the load of (b) on every proxy at once: ${sizes.streams} concurrent streams and ${sizes.streams * sizes.rounds} streams per proxy\n\n${TOGETHER_NOTE}`,
    STREAMED,
  );
  table(
    'c',
    `### (c) ${sizes.pacedStreams} concurrent streams paced at ${sizes.paceMs} ms per chunk (${sizes.pacedChunks} chunks each)`,
    PACED,
  );
  table('d', `### (d) time to first chunk at concurrency 1, ${sizes.sequential} sequential streams`, FIRST_CHUNK);
  return parts.join('\n\n');
}

export interface TargetCheck {
  target: string;
  value: string;
  met: boolean | null;
}

/** The issue's overhead targets, from the medians and within-run comparisons (null = not measurable with the chosen targets). */
export function checkTargets(medians: Medians): TargetCheck[] {
  const fg = (s: ScenarioId) => medians[s]?.fleetgate;
  const checks: TargetCheck[] = [];
  const add = (target: string, value: number | undefined, limit: number, cmp: 'le' | 'ge', unit = 'x') => {
    if (value === undefined || !Number.isFinite(value)) {
      checks.push({ target, value: 'not measured', met: null });
      return;
    }
    checks.push({
      target,
      value: `${value.toFixed(unit === 'x' ? 2 : 3)}${unit === 'x' ? 'x' : ` ${unit}`}`,
      met: cmp === 'le' ? value <= limit : value >= limit,
    });
  };
  add('CPU per 100k streamed chunks <= 1.3x HAProxy (b)', fg('b')?.cpuVsHaproxy, 1.3, 'le');
  add(
    'CPU per 100k streamed chunks <= 1.3x HAProxy, every proxy at once (b-cpu)',
    fg('b-cpu')?.cpuVsHaproxy,
    1.3,
    'le',
  );
  add('CPU per 1k non-streamed requests <= 1.15x fastify floor (a)', fg('a')?.cpuVsFastifyFloor, 1.15, 'le');
  add(
    'CPU per 1k non-streamed requests <= 1.15x fastify floor, every proxy at once (a-cpu)',
    fg('a-cpu')?.cpuVsFastifyFloor,
    1.15,
    'le',
  );
  add('TTFC p50 <= 1.2x fastify floor, 256 streams (b)', fg('b')?.ttfcVsFastifyFloor, 1.2, 'le');
  add('TTFC p50 <= 1.2x fastify floor, every proxy at once (b-cpu)', fg('b-cpu')?.ttfcVsFastifyFloor, 1.2, 'le');
  add('added TTFC p50 <= 1 ms over direct at concurrency 1 (d)', fg('d')?.addedTtfcMs, 1, 'le', 'ms');
  add('1000 paced streams: chunk rate >= 0.95x NGINX (c)', fg('c')?.rateVsNginx, 0.95, 'ge');
  add('1000 paced streams: peak RSS <= 200 MB (c)', fg('c')?.peakRssMB, 200, 'le', 'MB');
  const of = (s: ScenarioId, target: string) => medians[s]?.[target];
  add('#41 tracing off: CPU per 1k requests <= 1.02x the build before (a-cpu)', fg('a-cpu')?.cpuVsBefore, 1.02, 'le');
  add(
    '#41 tracing on, ratio 1.0: CPU per 1k requests <= 1.15x the build before (a-cpu)',
    of('a-cpu', 'fleetgate-tracing')?.cpuVsBefore,
    1.15,
    'le',
  );
  add(
    '#41 token-latency histograms alone: CPU per 100k chunks <= 1.03x without (b-cpu)',
    fg('b-cpu')?.cpuVsNoTokenLatency,
    1.03,
    'le',
  );
  // Issue #54: the hot path on a fast core, every proxy side by side (`--issue54`).
  add('#54 CPU per 1k requests <= 1.25x fastify floor (a-cpu)', fg('a-cpu')?.cpuVsFastifyFloor, 1.25, 'le');
  add('#54 CPU per 100k chunks <= 1.25x fastify floor (b-cpu)', fg('b-cpu')?.cpuVsFastifyFloor, 1.25, 'le');
  add('#54 RSS after 64 concurrent requests <= 200 MB (a-cpu)', fg('a-cpu')?.rssMB, 200, 'le', 'MB');
  return checks;
}

export function renderChecks(checks: TargetCheck[]): string {
  return markdownTable(
    ['issue target', 'fleetgate', 'met'],
    checks.map((c) => [c.target, c.value, c.met === null ? '—' : c.met ? 'yes' : 'NO']),
  );
}
