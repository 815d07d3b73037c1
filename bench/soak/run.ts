/**
 * `npm run bench:soak -- [--minutes 10] [--seed N] [--rate 6] [--out FILE]`: the chaos soak (soak.ts)
 * with 7 engines and at least 20 faults of every kind over 10 minutes; prints the ledger's table and
 * writes the results JSON and the timeline SVG beside it. Exit 1 when the ledger or the resources fail.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { numberFlag, RAW_RESULTS_DIR, runBench, writeResults } from '../lib/cli.js';
import { stamp } from '../lib/machine.js';
import { runSoak } from './soak.js';
import { renderTable } from './table.js';
import { timelineSvg } from './timeline-svg.js';

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      minutes: { type: 'string', default: '10' },
      seed: { type: 'string', default: '1' },
      rate: { type: 'string', default: '6' },
      faults: { type: 'string' },
      out: { type: 'string' },
    },
  });
  const minutes = numberFlag(values.minutes, '--minutes', 10, 0.5, true);
  const seed = numberFlag(values.seed, '--seed', 1, 0);
  const rate = numberFlag(values.rate, '--rate', 6, 0.1, true);
  // One fault every 25 s: 24 over 10 minutes, every kind at least twice.
  const faults = numberFlag(values.faults, '--faults', Math.max(9, Math.round((minutes * 60) / 25)), 0);
  const out = values.out ?? join(RAW_RESULTS_DIR, `soak-${stamp()}.json`);
  const startedMs = Date.now();
  const result = await runSoak({
    durationMs: minutes * 60_000,
    seed,
    engines: 7,
    faults,
    rate,
    deadlineMs: 90_000,
    windowMs: 60_000,
    progress: (line) => process.stdout.write(`${line}\n`),
  });
  process.stdout.write(`\n${renderTable(result)}\n`);
  const { rows, samples, ...summary } = result;
  writeResults(out, 'soak', startedMs, {
    ...summary,
    samples,
    notClean: rows.filter((r) => r.outcome !== 'complete' && r.outcome !== 'aborted'),
  });
  const svg = out.replace(/\.json$/, '.svg');
  writeFileSync(
    svg,
    timelineSvg({
      title: `fleetgate soak: ${minutes} min, seed ${seed}, ${result.faults.length} faults, ${result.table.sent} requests`,
      durationMs: minutes * 60_000,
      samples,
      errorTimesMs: result.errorTimesMs,
      faults: result.faults,
    }),
  );
  process.stdout.write(`results: ${out}\ntimeline: ${svg}\n`);
  if (result.failures.length > 0) {
    process.stdout.write(`FAIL:\n${result.failures.map((f) => `  - ${f}`).join('\n')}\n`);
    return 1;
  }
  process.stdout.write('PASS\n');
  return 0;
}

runBench('bench:soak', main);
