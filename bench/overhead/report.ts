/** Tables (medians of runs, ratios to HAProxy / NGINX / direct) and the issue's targets for the overhead bench. */
import { median } from '../lib/stats.js';
import { fmt, markdownTable, pct, ratio } from '../lib/table.js';
import type { Metrics, ScenarioId, Sizes } from './scenarios.js';

export interface RunRecord {
  scenario: ScenarioId;
  run: number;
  target: string;
  metrics: Metrics | null;
  error: string | null;
}

export type Medians = Partial<Record<ScenarioId, Record<string, Metrics>>>;

/** Per scenario and target, the median of each metric over the runs that succeeded. */
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
  // (d): added time to first chunk vs direct, as the median of per-run differences.
  const d = out.d;
  if (d?.direct) {
    for (const target of Object.keys(d)) {
      const diffs: number[] = [];
      for (const r of records) {
        if (r.scenario !== 'd' || r.target !== target || !r.metrics) continue;
        const direct = records.find((x) => x.scenario === 'd' && x.run === r.run && x.target === 'direct');
        if (direct?.metrics) diffs.push(r.metrics.ttfcP50Ms - direct.metrics.ttfcP50Ms);
      }
      d[target].addedTtfcMs = median(diffs);
    }
  }
  return out;
}

function failures(records: RunRecord[], scenario: ScenarioId, target: string): string {
  const failed = records.filter((r) => r.scenario === scenario && r.target === target && r.error !== null).length;
  return failed > 0 ? ` (${failed} run(s) failed)` : '';
}

export function renderTables(medians: Medians, targets: string[], records: RunRecord[], sizes: Sizes): string {
  const parts: string[] = [];
  const a = medians.a;
  if (a) {
    const h = a.haproxy?.cpuPer1kReq;
    const n = a.nginx?.cpuPer1kReq;
    const dir = a.direct?.reqPerSec;
    parts.push(
      `### (a) non-streamed small requests, concurrency ${sizes.concurrency}, ${sizes.requests} requests per run\n\n` +
        markdownTable(
          [
            'target',
            'req/s',
            'p50 ms',
            'p99 ms',
            'proxy CPU s / 1k req',
            'CPU vs HAProxy',
            'CPU vs NGINX',
            'req/s vs direct',
            'core 1 busy',
            'other load',
            'errors',
          ],
          targets
            .filter((t) => a[t])
            .map((t) => {
              const m = a[t];
              return [
                t + failures(records, 'a', t),
                fmt(m.reqPerSec, 0),
                fmt(m.p50Ms, 2),
                fmt(m.p99Ms, 2),
                fmt(m.cpuPer1kReq, 3),
                ratio(m.cpuPer1kReq, h),
                ratio(m.cpuPer1kReq, n),
                ratio(m.reqPerSec, dir),
                pct(m.core1Busy),
                pct(m.otherCores),
                fmt(m.errors, 0),
              ];
            }),
        ),
    );
  }
  const b = medians.b;
  if (b) {
    const h = b.haproxy?.cpuPer100kChunks;
    const n = b.nginx?.cpuPer100kChunks;
    const dir = b.direct?.chunksPerSec;
    parts.push(
      `### (b) ${sizes.streams} concurrent SSE streams of ${sizes.chunks} tokens at full speed, ${sizes.streams * sizes.rounds} streams per run\n\n` +
        markdownTable(
          [
            'target',
            'chunks/s',
            'TTFC p50 ms',
            'TTFC p99 ms',
            'proxy CPU s / 100k chunks',
            'CPU vs HAProxy',
            'CPU vs NGINX',
            'chunks/s vs direct',
            'core 1 busy',
            'other load',
            'errors',
          ],
          targets
            .filter((t) => b[t])
            .map((t) => {
              const m = b[t];
              return [
                t + failures(records, 'b', t),
                fmt(m.chunksPerSec, 0),
                fmt(m.ttfcP50Ms, 2),
                fmt(m.ttfcP99Ms, 2),
                fmt(m.cpuPer100kChunks, 3),
                ratio(m.cpuPer100kChunks, h),
                ratio(m.cpuPer100kChunks, n),
                ratio(m.chunksPerSec, dir),
                pct(m.core1Busy),
                pct(m.otherCores),
                fmt(m.errors, 0),
              ];
            }),
        ),
    );
  }
  const c = medians.c;
  if (c) {
    const nr = c.nginx?.chunksPerSec;
    const h = c.haproxy?.cpuPer100kChunks;
    parts.push(
      `### (c) ${sizes.pacedStreams} concurrent streams paced at ${sizes.paceMs} ms per chunk (${sizes.pacedChunks} chunks each)\n\n` +
        markdownTable(
          [
            'target',
            'chunks/s',
            'share of expected',
            'rate vs NGINX',
            'gap p50 ms',
            'gap p99 ms',
            'proxy peak RSS MB',
            'proxy CPU s / 100k chunks',
            'CPU vs HAProxy',
            'core 1 busy',
            'other load',
            'errors',
          ],
          targets
            .filter((t) => c[t])
            .map((t) => {
              const m = c[t];
              return [
                t + failures(records, 'c', t),
                fmt(m.chunksPerSec, 0),
                pct(m.rateShare, 1),
                ratio(m.chunksPerSec, nr),
                fmt(m.gapP50Ms, 1),
                fmt(m.gapP99Ms, 1),
                fmt(m.peakRssMB, 1),
                fmt(m.cpuPer100kChunks, 3),
                ratio(m.cpuPer100kChunks, h),
                pct(m.core1Busy),
                pct(m.otherCores),
                fmt(m.errors, 0),
              ];
            }),
        ),
    );
  }
  const d = medians.d;
  if (d) {
    parts.push(
      `### (d) time to first chunk at concurrency 1, ${sizes.sequential} sequential streams\n\n` +
        markdownTable(
          ['target', 'TTFC p50 ms', 'TTFC p90 ms', 'added p50 vs direct ms', 'errors'],
          targets
            .filter((t) => d[t])
            .map((t) => {
              const m = d[t];
              return [
                t + failures(records, 'd', t),
                fmt(m.ttfcP50Ms, 3),
                fmt(m.ttfcP90Ms, 3),
                t === 'direct' ? '—' : fmt(m.addedTtfcMs, 3),
                fmt(m.errors, 0),
              ];
            }),
        ),
    );
  }
  return parts.join('\n\n');
}

export interface TargetCheck {
  target: string;
  value: string;
  met: boolean | null;
}

/** The issue's overhead targets, from the medians (null = not measurable with the chosen targets). */
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
  const r = (x: number | undefined, y: number | undefined) => (x !== undefined && y !== undefined ? x / y : undefined);
  add(
    'CPU per 100k streamed chunks <= 2x HAProxy (b)',
    r(fg('b')?.cpuPer100kChunks, medians.b?.haproxy?.cpuPer100kChunks),
    2,
    'le',
  );
  add(
    'CPU per 1k non-streamed requests <= 2.5x HAProxy (a)',
    r(fg('a')?.cpuPer1kReq, medians.a?.haproxy?.cpuPer1kReq),
    2.5,
    'le',
  );
  add('added TTFC p50 <= 1 ms over direct at concurrency 1 (d)', fg('d')?.addedTtfcMs, 1, 'le', 'ms');
  add(
    '1000 paced streams: chunk rate >= 0.9x NGINX (c)',
    r(fg('c')?.chunksPerSec, medians.c?.nginx?.chunksPerSec),
    0.9,
    'ge',
  );
  add('1000 paced streams: peak RSS <= 200 MB (c)', fg('c')?.peakRssMB, 200, 'le', 'MB');
  return checks;
}

export function renderChecks(checks: TargetCheck[]): string {
  return markdownTable(
    ['issue target', 'fleetgate', 'met'],
    checks.map((c) => [c.target, c.value, c.met === null ? '—' : c.met ? 'yes' : 'NO']),
  );
}
