import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { JobMetrics } from '../../bench/balance/job.js';
import { type BalanceRecord, checkTargets as balanceChecks, versusBest } from '../../bench/balance/report.js';
import { inRunOrder } from '../../bench/lib/cli.js';
import { checkTargets, mediansOf, type RunRecord } from '../../bench/overhead/report.js';
import type { ScenarioId } from '../../bench/overhead/scenarios.js';

function record(run: number, target: string, cpuPer1kReq: number, scenario: ScenarioId = 'a'): RunRecord {
  return { scenario, run, target, metrics: { cpuPer1kReq, reqPerSec: 1000 }, error: null };
}

const checkNamed = (medians: ReturnType<typeof mediansOf>, name: string) =>
  checkTargets(medians).find((c) => c.target === name);

test('overhead: CPU vs HAProxy is the median of the within-run ratios, not a ratio of medians', () => {
  // The machine slows down from run to run; within each run fleetgate costs 2x, 2.2x, 2x HAProxy.
  // The ratio of the medians would be 4.4 / 2 = 2.2x.
  const records = [
    record(1, 'haproxy', 1),
    record(1, 'fleetgate', 2),
    record(2, 'haproxy', 2),
    record(2, 'fleetgate', 4.4),
    record(3, 'haproxy', 3),
    record(3, 'fleetgate', 6),
  ];
  const medians = mediansOf(records);
  assert.equal(medians.a?.fleetgate.cpuPer1kReq, 4.4);
  assert.equal(medians.a?.fleetgate.cpuVsHaproxy, 2);
  const name = 'CPU per 1k non-streamed requests <= 2.5x HAProxy (a)';
  assert.deepEqual(checkNamed(medians, name), { target: name, value: '2.00x', met: true });
});

test('overhead: the side-by-side runs have their own CPU check, apart from the runs one after another', () => {
  const records = [
    record(1, 'haproxy', 1, 'a-cpu'),
    record(1, 'fleetgate', 2.4, 'a-cpu'),
    record(1, 'haproxy', 1),
    record(1, 'fleetgate', 3),
  ];
  const medians = mediansOf(records);
  const together = 'CPU per 1k non-streamed requests <= 2.5x HAProxy, every proxy at once (a-cpu)';
  const apart = 'CPU per 1k non-streamed requests <= 2.5x HAProxy (a)';
  assert.deepEqual(checkNamed(medians, together), { target: together, value: '2.40x', met: true });
  assert.deepEqual(checkNamed(medians, apart), { target: apart, value: '3.00x', met: false });
});

test('overhead: a run without the peer adds no ratio', () => {
  const records = [record(1, 'haproxy', 1), record(1, 'fleetgate', 3), record(2, 'fleetgate', 1)];
  const medians = mediansOf(records);
  assert.equal(medians.a?.fleetgate.cpuVsHaproxy, 3);
  const failed: RunRecord = { scenario: 'a', run: 3, target: 'haproxy', metrics: null, error: 'exited early' };
  assert.equal(mediansOf([...records, failed]).a?.fleetgate.cpuVsHaproxy, 3);
});

test('benches measure the targets in alternating order, run after run', () => {
  assert.deepEqual(inRunOrder(['direct', 'fleetgate', 'nginx'], 1), ['direct', 'fleetgate', 'nginx']);
  assert.deepEqual(inRunOrder(['direct', 'fleetgate', 'nginx'], 2), ['nginx', 'fleetgate', 'direct']);
  assert.deepEqual(inRunOrder(['direct', 'fleetgate', 'nginx'], 3), ['direct', 'fleetgate', 'nginx']);
});

function job(run: number, target: string, makespanSec: number): BalanceRecord {
  return { run, target, metrics: { makespanSec } as JobMetrics, error: null };
}

test('balance: three balancers that take turns being fastest each score above 1x against the better of the others', () => {
  // The same three makespans every run, each balancer fastest once: a tie, by construction.
  const names = ['fleetgate least-loaded', 'nginx least_conn', 'haproxy leastconn'];
  const turns = [
    [10, 11, 12],
    [11, 12, 10],
    [12, 10, 11],
  ];
  const records = turns.flatMap((makespans, run) => names.map((name, i) => job(run + 1, name, makespans[i])));
  for (const name of names) {
    const v = versusBest(
      records,
      name,
      names.filter((other) => other !== name),
    );
    assert.equal(v.ratios.length, 3);
    assert.equal(v.wins, 1, name);
    assert.ok(v.ratios.sort((a, b) => a - b)[1] > 1, `${name}: median ${v.ratios[1]}`);
  }
  const [check] = balanceChecks(records, false, ['fleetgate least-loaded'], false);
  assert.equal(check.met, false, 'the issue check counts a tie as not met');
  assert.match(check.value, /^1\.1000x of best peer/);
});
