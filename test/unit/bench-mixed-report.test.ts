import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type MixedRecord, type MixedRow, mixedChecks, summarizeRow } from '../../bench/mixed/report.js';

const ROWS: MixedRow[] = [
  { id: 'idle', name: 'idle', idle: true },
  { id: 'classes', name: 'with classes', without: 'no-classes' },
  { id: 'no-classes', name: 'without classes' },
];

/** One run of a row: interactive requests one a second with these TTFTs, the first at t=0. */
function record(run: number, target: string, ttfts: number[], makespanSec: number | null = null): MixedRecord {
  const interactive = ttfts.map((ttftMs, i) => ({
    sentMs: i * 1000 + 0.5,
    sentAtEpochMs: i * 1000,
    ttftMs,
    status: 200,
  }));
  return {
    run,
    target,
    warmedUp: 0,
    ttftMs: ttfts,
    interactiveErrors: 0,
    interactive,
    loopDelayMaxMs: [],
    makespanSec,
    batchErrors: makespanSec === null ? null : 0,
    batchErrorKinds: {},
    error: null,
  };
}

const steady = (ms: number) => Array.from({ length: 29 }, () => ms);

test('mixed: the p99 after the first second leaves out the request sent with the burst', () => {
  const records = [record(1, 'with classes', [120, ...steady(20)], 30)];
  const summary = summarizeRow(records, ROWS[1]);
  assert.equal(summary?.ttft.p99Ms, 120);
  assert.equal(summary?.ttft.p99AfterMs, 20);
});

test('mixed: each row with classes is held to 2x the idle p99 (all requests and after the first second) and to 1.02x its row without classes', () => {
  const records = [
    record(1, 'idle', [40, ...steady(12)]),
    record(1, 'with classes', [100, ...steady(20)], 30.3),
    record(1, 'without classes', [5000, ...steady(4000)], 30),
    record(2, 'idle', [50, ...steady(10)]),
    record(2, 'with classes', [90, ...steady(30)], 31),
    record(2, 'without classes', [6000, ...steady(4000)], 29),
  ];
  const summaries = ROWS.map((row) => summarizeRow(records, row)).filter((s) => s !== null);
  const checks = mixedChecks(summaries, ROWS);
  const named = (prefix: string) => checks.find((c) => c.target.startsWith(prefix));
  // Pooled: 100 against 50 = 2.00x; each run: 100 / 40, 90 / 50.
  assert.deepEqual(named('with classes: TTFT p99 <='), {
    target: "with classes: TTFT p99 <= 2x idle's",
    value: '2.00x (runs 2.50 / 1.80; median 2.15x)',
    met: true,
  });
  // After the first second: 30 against 12 = 2.5x; each run 20 / 12, 30 / 10.
  assert.deepEqual(named('with classes: TTFT p99 after'), {
    target: "with classes: TTFT p99 after the first second <= 2x idle's",
    value: '2.50x (runs 1.67 / 3.00; median 2.33x)',
    met: false,
  });
  // Median makespans 30.65 against 29.5; each run 30.3 / 30, 31 / 29.
  assert.deepEqual(named('with classes: batch makespan'), {
    target: 'with classes: batch makespan <= 1.02x without classes',
    value: '1.039x (runs 1.010 / 1.069)',
    met: false,
  });
  assert.equal(checks.length, 3, 'no check for the idle row or the row without classes');
});
