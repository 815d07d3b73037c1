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

test('overhead: CPU vs the fastify floor is the median of the within-run ratios, not a ratio of medians', () => {
  // The machine slows down from run to run; within each run fleetgate costs 1.1x, 1.21x, 1.1x the floor.
  // The ratio of the medians would be 2.42 / 2 = 1.21x.
  const records = [
    record(1, 'fastify-floor', 1),
    record(1, 'fleetgate', 1.1),
    record(2, 'fastify-floor', 2),
    record(2, 'fleetgate', 2.42),
    record(3, 'fastify-floor', 3),
    record(3, 'fleetgate', 3.3),
  ];
  const medians = mediansOf(records);
  assert.equal(medians.a?.fleetgate.cpuPer1kReq, 2.42);
  assert.ok(Math.abs((medians.a?.fleetgate.cpuVsFastifyFloor ?? 0) - 1.1) < 1e-9);
  const name = 'CPU per 1k non-streamed requests <= 1.15x fastify floor (a)';
  assert.deepEqual(checkNamed(medians, name), { target: name, value: '1.10x', met: true });
});

test('overhead: the side-by-side runs have their own CPU check, apart from the runs one after another', () => {
  const records = [
    record(1, 'fastify-floor', 1, 'a-cpu'),
    record(1, 'fleetgate', 1.1, 'a-cpu'),
    record(1, 'fastify-floor', 1),
    record(1, 'fleetgate', 1.3),
  ];
  const medians = mediansOf(records);
  const together = 'CPU per 1k non-streamed requests <= 1.15x fastify floor, every proxy at once (a-cpu)';
  const apart = 'CPU per 1k non-streamed requests <= 1.15x fastify floor (a)';
  assert.deepEqual(checkNamed(medians, together), { target: together, value: '1.10x', met: true });
  assert.deepEqual(checkNamed(medians, apart), { target: apart, value: '1.30x', met: false });
});

test('overhead: TTFC vs the fastify floor (issue 37) is the median of within-run ratios, (b) and (b-cpu) apart', () => {
  const ttfc = (run: number, target: string, ttfcP50Ms: number, scenario: ScenarioId): RunRecord => ({
    scenario,
    run,
    target,
    metrics: { ttfcP50Ms },
    error: null,
  });
  // Within each run of (b) fleetgate takes 1.1x, 1.5x, 1.0x the floor's time to first chunk.
  const records = [
    ttfc(1, 'fastify-floor', 100, 'b'),
    ttfc(1, 'fleetgate', 110, 'b'),
    ttfc(2, 'fastify-floor', 400, 'b'),
    ttfc(2, 'fleetgate', 600, 'b'),
    ttfc(3, 'fastify-floor', 700, 'b'),
    ttfc(3, 'fleetgate', 700, 'b'),
    ttfc(1, 'fastify-floor', 100, 'b-cpu'),
    ttfc(1, 'fleetgate', 500, 'b-cpu'),
  ];
  const medians = mediansOf(records);
  const apart = 'TTFC p50 <= 1.2x fastify floor, 256 streams (b)';
  const together = 'TTFC p50 <= 1.2x fastify floor, every proxy at once (b-cpu)';
  assert.deepEqual(checkNamed(medians, apart), { target: apart, value: '1.10x', met: true });
  assert.deepEqual(checkNamed(medians, together), { target: together, value: '5.00x', met: false });
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
