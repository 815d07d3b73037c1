import assert from 'node:assert/strict';
import { test } from 'node:test';
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
