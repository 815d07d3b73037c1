/**
 * The CI-sized soak (bench/soak/soak.ts): a fleet under `fleetgate launch`, a steady mixed load (plain
 * HTTP and the openai SDK) and a seeded fault per kind that strikes the proxy path, for about a
 * minute, with the same ledger and resource checks as `npm run bench:soak`: nothing lost, duplicated,
 * stuck or ended unclearly, every text whole. soak-vanish.test.ts shows that the ledger can fail.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ledgerFailures } from '../../bench/soak/ledger.js';
import { runSoak } from '../../bench/soak/soak.js';
import { HEAVY } from '../helpers/heavy.js';

test('CI soak: ~60 s of load and seeded faults; nothing lost, duplicated or stuck', HEAVY, async (t) => {
  const result = await runSoak({
    durationMs: 60_000,
    seed: 11,
    engines: 4,
    faults: 7,
    kinds: ['sigkill', 'sigstop', 'dp_rank_dead', 'startup_oom', 'sighup', 'drain', 'client_aborts'],
    rate: 4,
    deadlineMs: 45_000,
    windowMs: 15_000,
    progress: (line) => t.diagnostic(line),
  });
  const { table } = result;
  t.diagnostic(JSON.stringify({ table, faultKinds: result.faultKinds, growth: result.resources.growth }));
  assert.ok(table.sent >= 200, `${table.sent} sent`);
  assert.ok(result.faults.filter((f) => !f.note.startsWith('skipped')).length >= 5, JSON.stringify(result.faults));
  assert.deepEqual(ledgerFailures(table), [], JSON.stringify(result.rows.filter((r) => r.outcome !== 'complete')));
  assert.ok(table.completedWhole >= table.sent * 0.8, `${table.completedWhole} whole of ${table.sent}`);
  assert.ok(
    result.rows.filter((r) => r.outcome === 'complete').every((r) => r.backends.length === 1),
    'each answer names the engine it came from',
  );
});
