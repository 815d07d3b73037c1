/**
 * bench:mixed's figures: per row and run, the interactive requests' TTFT and the batch makespan;
 * their ratios to the idle row and to the row's configuration without classes (issue #19's targets);
 * the markdown table.
 */

import { median, percentileSorted } from '../lib/stats.js';
import type { InteractiveResult } from './interactive-client.js';

export interface MixedRecord {
  run: number;
  target: string;
  /** Requests the servers completed before the clock started: the warm-up's. */
  warmedUp: number;
  ttftMs: number[];
  interactiveErrors: number;
  /** Each interactive request: when it was sent (ms since the client started), its TTFT and status. */
  interactive: InteractiveResult['samples'];
  /** The interactive client's process: its worst event-loop delay in each second, ms. */
  loopDelayMaxMs: number[];
  makespanSec: number | null;
  batchErrors: number | null;
  /** The batch job's errors by kind (HTTP status or client error). */
  batchErrorKinds: Record<string, number>;
  error: string | null;
}

export interface MixedRow {
  id: string;
  name: string;
  idle?: boolean;
  /** A row with classes: the id of the same configuration without them. */
  without?: string;
}

/**
 * The first interactive request goes out at t=0 with the job's whole burst; the p99 of the requests
 * sent from this point on tells the steady state apart from it.
 */
const AFTER_MS = 1000;

interface TtftFigures {
  n: number;
  p50Ms: number;
  p99Ms: number;
  /** Over the requests sent `AFTER_MS` or later. */
  p99AfterMs: number;
}

function ttftFigures(records: MixedRecord[]): TtftFigures {
  const samples = records.flatMap((r) => r.interactive.filter((s) => s.ttftMs !== null));
  const all = samples.map((s) => s.ttftMs as number).sort((a, b) => a - b);
  const after = samples
    .filter((s) => s.sentMs >= AFTER_MS)
    .map((s) => s.ttftMs as number)
    .sort((a, b) => a - b);
  return {
    n: all.length,
    p50Ms: percentileSorted(all, 50),
    p99Ms: percentileSorted(all, 99),
    p99AfterMs: percentileSorted(after, 99),
  };
}

export function summarizeRow(records: MixedRecord[], row: MixedRow) {
  const mine = records.filter((r) => r.target === row.name && r.error === null);
  if (mine.length === 0) return null;
  const makespans = mine.map((r) => r.makespanSec).filter((m): m is number => m !== null);
  return {
    id: row.id,
    target: row.name,
    runs: mine.length,
    /** Over every run's interactive requests. */
    ttft: ttftFigures(mine),
    interactiveErrors: mine.reduce((sum, r) => sum + r.interactiveErrors, 0),
    makespanSec: makespans.length > 0 ? median(makespans) : null,
    batchErrors: mine.reduce((sum, r) => sum + (r.batchErrors ?? 0), 0),
    perRun: mine.map((r) => ({ run: r.run, ttft: ttftFigures([r]), makespanSec: r.makespanSec })),
  };
}

type Summary = NonNullable<ReturnType<typeof summarizeRow>>;

/** `mine / theirs` in each run both have, and their median. */
function perRunRatios(mine: Summary, theirs: Summary, pick: (run: Summary['perRun'][number]) => number | null) {
  const ratios = mine.perRun.flatMap((run) => {
    const other = theirs.perRun.find((o) => o.run === run.run);
    const a = pick(run);
    const b = other ? pick(other) : null;
    return a !== null && b !== null && b > 0 ? [a / b] : [];
  });
  return { ratios, median: ratios.length > 0 ? median(ratios) : null };
}

const times = (r: number, digits: number) => `${r.toFixed(digits)}x`;
const eachRun = (ratios: number[], digits: number) => ratios.map((r) => r.toFixed(digits)).join(' / ');

/**
 * Issue #19's targets for every row with classes: TTFT p99 <= 2x the idle row's (over all requests,
 * and over those sent after the first second), batch makespan <= 1.02x its row without classes.
 * Ratios of the pooled figures, then each run's ratio and their median.
 */
export function mixedChecks(summaries: Summary[], rows: readonly MixedRow[]) {
  const byId = (id: string) => summaries.find((s) => s.id === id);
  const idle = summaries.find((s) => rows.find((r) => r.id === s.id)?.idle);
  const checks: { target: string; value: string; met: boolean }[] = [];
  for (const row of rows) {
    const mine = byId(row.id);
    if (!mine || !row.without) continue;
    if (idle) {
      for (const [label, pick] of [
        ['TTFT p99', (f: TtftFigures) => f.p99Ms],
        ['TTFT p99 after the first second', (f: TtftFigures) => f.p99AfterMs],
      ] as const) {
        const ratio = pick(mine.ttft) / pick(idle.ttft);
        const runs = perRunRatios(mine, idle, (r) => pick(r.ttft));
        checks.push({
          target: `${row.name}: ${label} <= 2x idle's`,
          value: `${times(ratio, 2)} (runs ${eachRun(runs.ratios, 2)}; median ${runs.median?.toFixed(2) ?? '-'}x)`,
          met: ratio <= 2,
        });
      }
    }
    const without = byId(row.without);
    if (without?.makespanSec && mine.makespanSec) {
      const runs = perRunRatios(mine, without, (r) => r.makespanSec);
      const ratio = mine.makespanSec / without.makespanSec;
      checks.push({
        target: `${row.name}: batch makespan <= 1.02x ${without.target}`,
        value: `${times(ratio, 3)} (runs ${eachRun(runs.ratios, 3)})`,
        met: ratio <= 1.02,
      });
    }
  }
  return checks;
}

const fmt = (ms: number) =>
  Number.isNaN(ms) ? '-' : ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${ms.toFixed(0)} ms`;

/** The rows (pooled TTFT, median makespan), each run's figures, and the targets. */
export function mixedTables(summaries: Summary[], checks: ReturnType<typeof mixedChecks>): string[] {
  return [
    '| target | interactive n | TTFT p50 | TTFT p99 | TTFT p99 after 1 s | interactive errors | batch makespan s | batch errors |',
    '|---|---|---|---|---|---|---|---|',
    ...summaries.map(
      (s) =>
        `| ${s.target} | ${s.ttft.n} | ${fmt(s.ttft.p50Ms)} | ${fmt(s.ttft.p99Ms)} | ${fmt(s.ttft.p99AfterMs)} | ${s.interactiveErrors} | ${s.makespanSec?.toFixed(2) ?? '-'} | ${s.makespanSec === null ? '-' : s.batchErrors} |`,
    ),
    '',
    'Each run:',
    '',
    '| target | run | interactive n | TTFT p50 | TTFT p99 | TTFT p99 after 1 s | batch makespan s |',
    '|---|---|---|---|---|---|---|',
    ...summaries.flatMap((s) =>
      s.perRun.map(
        (r) =>
          `| ${s.target} | ${r.run} | ${r.ttft.n} | ${fmt(r.ttft.p50Ms)} | ${fmt(r.ttft.p99Ms)} | ${fmt(r.ttft.p99AfterMs)} | ${r.makespanSec?.toFixed(2) ?? '-'} |`,
      ),
    ),
    '',
    '| issue #19 target | measured | met |',
    '|---|---|---|',
    ...checks.map((c) => `| ${c.target} | ${c.value} | ${c.met ? 'yes' : 'NO'} |`),
    '',
  ];
}
