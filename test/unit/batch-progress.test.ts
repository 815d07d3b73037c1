/**
 * A batch's progress across runs: done/total and the ETA count the answers of earlier runs, the rate
 * is this run's pace; a pass over a large file says where it is ("reading out.jsonl: 3.1 of 5.0 GB").
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BatchProgress, progressLine } from '../../src/batch/batch-progress.js';
import { scanReporter } from '../../src/batch/progress-reporter.js';

test('a resumed run: done counts earlier answers, the rate and ETA this run’s pace', () => {
  let now = 0;
  const progress = new BatchProgress(1000, 600, { now: () => now });
  for (let i = 0; i < 40; i++) progress.completed(3);
  now = 2000;
  const p = progress.snapshot();
  assert.equal(p.done, 640);
  assert.equal(p.total, 1000);
  assert.equal(p.requests_per_second, 20, '40 in 2 s, not 640');
  assert.equal(p.eta_seconds, 18, '360 left at 20/s');
  assert.match(progressLine(p), /^640\/1000 64\.0% \| 20 req\/s/);
});

test('a pass over a file: a line per interval with bytes and count, one at its end, none for a short one', () => {
  let now = 0;
  const lines: string[] = [];
  const out = { write: (text: string) => lines.push(text) };
  const report = scanReporter(out, 'plain', { verb: 'reading', file: 'out.jsonl', noun: 'answers' }, () => now);
  report(1e9, 5e9, 100_000);
  assert.deepEqual(lines, [], 'not before the interval');
  now = 6000;
  report(3.1e9, 5e9, 540_000);
  now = 7000;
  report(4e9, 5e9, 700_000);
  now = 9000;
  report(5e9, 5e9, 870_000);
  report(5e9, 5e9, 870_000);
  assert.deepEqual(lines, [
    'reading out.jsonl: 3.1 of 5.0 GB, 540,000 answers\n',
    'reading out.jsonl: 5.0 of 5.0 GB, 870,000 answers\n',
  ]);

  const json: string[] = [];
  const quick = scanReporter(
    { write: (t: string) => json.push(t) },
    'json',
    { verb: 'checking', file: 'in.jsonl', noun: 'requests' },
    () => 0,
  );
  quick(2e6, 2e6, 5000);
  assert.deepEqual(json, [], 'a pass under a second prints nothing');
  now = 0;
  const events: string[] = [];
  const later = scanReporter(
    { write: (t: string) => events.push(t) },
    'json',
    { verb: 'checking', file: 'in.jsonl', noun: 'requests' },
    () => now,
  );
  now = 2500;
  later(1e6, 4e6, 3000);
  assert.deepEqual(JSON.parse(events[0]), {
    event: 'checking',
    file: 'in.jsonl',
    bytes: 1e6,
    total_bytes: 4e6,
    requests: 3000,
  });
});
