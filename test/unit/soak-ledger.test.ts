/**
 * The soak's ledger and its verdict (bench/soak/ledger.ts), the resource comparison
 * (resources.ts), the seeded fault plan (faults.ts) and the timeline (timeline-svg.ts): pure
 * functions, checked with rows and scrapes built here. The ledger must be able to fail: a request
 * that vanishes, a repeat, a gap, a second answer and an unclear ending each fail it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FAULT_KINDS, planFaults } from '../../bench/soak/faults.js';
import { judgeText, Ledger, ledgerFailures, summarize } from '../../bench/soak/ledger.js';
import { compareWindows, parseSample, resourceFailures } from '../../bench/soak/resources.js';
import { timelineSvg } from '../../bench/soak/timeline-svg.js';
import { outputText } from '../../src/sim/text-gen.js';

function ledgerWith(n: number): Ledger {
  const ledger = new Ledger();
  for (let i = 0; i < n; i++) {
    const row = ledger.open({ kind: 'chat-stream', client: 'fetch', mode: 'normal', tokens: 10 + i, sentMs: i });
    ledger.settle(row, i + 5, { outcome: 'complete', text: outputText(10 + i), backends: ['gpu0'] });
  }
  return ledger;
}

test('judgeText: the deterministic answer is whole; a missing or wrong token is a gap; more is a repeat', () => {
  assert.equal(judgeText(outputText(30), 30), 'whole');
  assert.equal(judgeText(outputText(29), 30), 'gap');
  assert.equal(judgeText(outputText(30).replace(' France', ' Spain'), 30), 'gap');
  assert.equal(judgeText(outputText(12) + outputText(30).slice(outputText(10).length), 30), 'repeated');
});

test('a clean ledger passes; clear errors are counted by type and as a share of sent', () => {
  const ledger = ledgerWith(8);
  const row = ledger.open({ kind: 'completion-stream', client: 'openai-sdk', mode: 'normal', tokens: 5, sentMs: 1 });
  ledger.settle(row, 9, { outcome: 'error', errorType: 'upstream_error', status: 200 });
  const aborted = ledger.open({ kind: 'chat-stream', client: 'fetch', mode: 'abort', tokens: 5, sentMs: 1 });
  ledger.settle(aborted, 3, { outcome: 'aborted' });
  const table = summarize(ledger.rows);
  assert.equal(table.sent, 10);
  assert.equal(table.completedWhole, 8);
  assert.deepEqual(table.errorsByType, { upstream_error: 1 });
  assert.deepEqual(table.streamErrorsByType, { upstream_error: 1 });
  assert.equal(table.abortedByClient, 1);
  assert.equal(table.errorShare, 0.1);
  assert.deepEqual(ledgerFailures(table), []);
});

test('the ledger fails on a vanished request, a repeat, a gap, a second answer and an unclear ending', () => {
  const cases: Array<[string, (ledger: Ledger) => void, RegExp]> = [
    [
      'open at the end',
      (l) => l.open({ kind: 'chat', client: 'fetch', mode: 'normal', tokens: 5, sentMs: 0 }),
      /1 stuck/,
    ],
    ['lost', (l) => l.settle(l.rows[0], 90, { outcome: 'lost' }), /1 lost/],
    ['repeated text', (l) => Object.assign(l.rows[1], { text: outputText(11) + outputText(3) }), /1 duplicated/],
    ['a gap', (l) => Object.assign(l.rows[2], { text: outputText(5) }), /1 completed with a gap/],
    ['two answers', (l) => l.settle(l.rows[3], 99, { outcome: 'complete', text: '' }), /1 duplicated/],
    [
      'a stream cut with no error event',
      (l) => Object.assign(l.rows[4], { outcome: 'unclear', errorType: 'stream_ended_without_done_or_error' }),
      /1 ended with neither an answer nor a clear error/,
    ],
  ];
  for (const [what, spoil, expected] of cases) {
    const ledger = ledgerWith(6);
    if (what === 'lost') ledger.rows[0].settlements = 0;
    spoil(ledger);
    const failures = ledgerFailures(summarize(ledger.rows));
    assert.equal(failures.length, 1, `${what}: ${failures.join('; ')}`);
    assert.match(failures[0], expected, what);
  }
});

function scrape(rss: number, fds: number, lagSeconds = 0.01): string {
  return [
    `process_resident_memory_bytes ${rss}`,
    'nodejs_heap_size_used_bytes 1000000',
    `process_open_fds ${fds}`,
    'nodejs_active_handles_total{type="Socket"} 4',
    'nodejs_active_handles_total{type="Timeout"} 3',
    `nodejs_eventloop_lag_p99_seconds ${lagSeconds}`,
    'fleetgate_upstream_connections{backend="gpu0"} 2',
    'fleetgate_upstream_connections{backend="gpu1"} 3',
    'fleetgate_backend_up{backend="gpu0"} 1',
    'fleetgate_backend_up{backend="gpu1"} 0',
    'fleetgate_backend_inflight_requests{backend="gpu0"} 5',
    'fleetgate_queue_waiting_requests{class="batch"} 2',
  ].join('\n');
}

test('resources: a scrape is parsed; first vs last minute growth over 10% of RSS or fds fails', () => {
  const sample = parseSample(scrape(100 * 2 ** 20, 40, 0.02), 0);
  assert.equal(sample.activeHandles, 7);
  assert.equal(sample.eventLoopP99Ms, 20);
  assert.deepEqual(sample.socketsByBackend, { gpu0: 2, gpu1: 3 });
  assert.equal(sample.readyBackends, 1);
  assert.equal(sample.queued, 2);

  const flat = Array.from({ length: 60 }, (_, i) =>
    parseSample(scrape(100 * 2 ** 20 + (i % 3) * 2 ** 20, 40), i * 5_000),
  );
  const report = compareWindows(flat, 60_000);
  assert.deepEqual(resourceFailures(report), []);
  assert.ok(Math.abs(report.growth.rss) < 0.02);

  const leaking = Array.from({ length: 60 }, (_, i) =>
    parseSample(scrape(100 * 2 ** 20 + i * 2 ** 20, 40 + i), i * 5_000),
  );
  const failures = resourceFailures(compareWindows(leaking, 60_000));
  assert.equal(failures.length, 2, failures.join('; '));
  assert.match(failures[0], /RSS grew/);
  assert.match(failures[1], /open fds grew/);
});

test('faults: a seed gives the same plan; every kind comes before any repeats; times are in the window', () => {
  const opts = { seed: 7, durationMs: 600_000, count: 24, engines: 7, quietMs: 20_000 };
  const plan = planFaults(opts);
  assert.deepEqual(planFaults(opts), plan);
  assert.notDeepEqual(planFaults({ ...opts, seed: 8 }), plan);
  assert.equal(plan.length, 24);
  assert.deepEqual(new Set(plan.slice(0, FAULT_KINDS.length).map((f) => f.kind)), new Set(FAULT_KINDS));
  for (const fault of plan) {
    assert.ok(fault.atMs >= 20_000 && fault.atMs <= 580_000, String(fault.atMs));
    assert.ok(fault.engine >= 0 && fault.engine < 7);
  }
  assert.deepEqual(
    plan.map((f) => f.atMs),
    [...plan.map((f) => f.atMs)].sort((a, b) => a - b),
  );
});

test('timeline: one lane per series and a labelled mark per fault', () => {
  const samples = [0, 5_000, 10_000].map((t) => parseSample(scrape(1e8, 40), t));
  const svg = timelineSvg({
    title: 'soak <test>',
    durationMs: 10_000,
    samples,
    errorTimesMs: [4_000, 4_500],
    faults: [{ atMs: 3_000, kind: 'sigkill', target: 'gpu2' }],
  });
  assert.match(svg, /^<svg /);
  assert.match(svg, /<title>soak &lt;test&gt;<\/title>/);
  for (const lane of ['ready backends', 'in flight', 'queued', 'client errors / 5 s'])
    assert.ok(svg.includes(lane), lane);
  assert.match(svg, /<title>sigkill gpu2 at 3\.0 s<\/title>/);
  assert.equal((svg.match(/<path /g) ?? []).length, 4);
});
