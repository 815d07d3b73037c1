/**
 * The runbook's `grep -E "Not enough memory|RuntimeError|ValueError"` as a floor, over every real log
 * excerpt (test/fixtures/logs): where the grep matches a line before the server was ever ready,
 * fleetgate's verdict is `failed`; where it matches in the log of a healthy server, fleetgate does
 * not fail it (there the grep errs, fleetgate must not). docs/log-verdicts.md shows the table, README
 * its summary.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fixtureVerdicts, verdictSummary, verdictTable } from '../helpers/log-verdict-table.js';

const rows = fixtureVerdicts();

describe('the runbook grep is a floor', () => {
  test('the fixtures include grep matches of both kinds, and failures the grep misses', () => {
    assert.ok(rows.some((row) => row.grepBeforeReady && row.failed));
    assert.ok(
      rows.some((row) => row.grepLines.length > 0 && !row.failed),
      'a healthy log the grep matches',
    );
    assert.ok(
      rows.some((row) => row.grepLines.length === 0 && row.failed),
      'a failure the grep misses',
    );
  });

  for (const row of rows.filter((r) => r.grepBeforeReady)) {
    test(`${row.fixture.file}: grep matches before ready, so fleetgate says failed`, () => {
      assert.equal(row.fleetgate.state, 'failed', `grep lines ${row.grepLines.join(', ')}`);
    });
  }

  for (const row of rows.filter((r) => r.grepLines.length > 0 && !r.failed)) {
    test(`${row.fixture.file}: grep matches a healthy server's log, fleetgate does not fail it`, () => {
      assert.notEqual(row.fleetgate.state, 'failed', String(row.fleetgate.reason));
    });
  }

  test('docs/log-verdicts.md shows the table as the fixtures make it', () => {
    const doc = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'log-verdicts.md'), 'utf8');
    const table = verdictTable(rows);
    assert.ok(doc.includes(table), `docs/log-verdicts.md should contain:\n${table}`);
  });

  test("README's summary counts the fixtures as they are", () => {
    const readme = readFileSync(join(import.meta.dirname, '..', '..', 'README.md'), 'utf8');
    const summary = verdictSummary(rows);
    assert.ok(readme.includes(summary), `README.md should contain:\n${summary}`);
    assert.ok(readme.includes(`On the ${rows.length} real logs`));
  });
});
