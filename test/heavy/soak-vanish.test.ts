/**
 * The soak's ledger can fail: a fake client receives one response and drops it, and the CI-sized
 * soak's checks (soak-ci.test.ts) must count it lost and fail the run. Its own file, so that each
 * soak stays well within the per-file test timeout.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runSoak } from '../../bench/soak/soak.js';
import { HEAVY } from '../helpers/heavy.js';

// A check of the soak's ledger, not of the runtime: run once in CI, with the soak (helpers/heavy.ts).
test('the soak fails when a request vanishes (a fake client drops a response)', HEAVY, async (t) => {
  const result = await runSoak({
    durationMs: 15_000,
    seed: 5,
    engines: 2,
    faults: 0,
    rate: 4,
    deadlineMs: 5_000,
    windowMs: 5_000,
    swallow: 1,
  });
  t.diagnostic(JSON.stringify(result.table));
  assert.equal(result.table.lost, 1, 'the dropped response is counted lost at its deadline');
  assert.ok(
    result.failures.some((f) => /1 lost/.test(f)),
    result.failures.join('; '),
  );
  assert.equal(result.table.completedWhole, result.table.sent - 1, 'every other request came back whole');
});
