/**
 * `npm test` leaves test/heavy/ out; FLEETGATE_HEAVY_TESTS=1 runs it, each file in its own process
 * (test/helpers/heavy.ts). A heavy case in a file elsewhere would run in a shard's shared process,
 * where a case that measures its process's memory reads the other files' garbage; a case in
 * test/heavy/ that is not heavy would run only in CI.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';

const TEST = new URL('../', import.meta.url);
/** HEAVY directly, or the benches' skip (test/helpers/bench-run.ts), which includes it. */
const HEAVY_IMPORT = /from '\.\.\/helpers\/(heavy|bench-run)\.js'/;

function testFiles(dir: string): string[] {
  return readdirSync(new URL(dir, TEST))
    .filter((file) => file.endsWith('.test.ts'))
    .map((file) => `${dir}${file}`);
}

const text = (file: string) => readFileSync(new URL(file, TEST), 'utf8');

test('the test files with a heavy case are the files of test/heavy/', () => {
  const helpers = readdirSync(new URL('helpers/', TEST)).filter((file) =>
    /from '\.\/heavy\.js'/.test(text(`helpers/${file}`)),
  );
  assert.deepEqual(helpers, ['bench-run.ts'], 'the helpers that pass HEAVY on (HEAVY_IMPORT names them)');
  const heavy = ['unit/', 'integration/', 'e2e/', 'heavy/']
    .flatMap(testFiles)
    .filter((file) => HEAVY_IMPORT.test(text(file)));
  assert.deepEqual(heavy.sort(), testFiles('heavy/').sort());
});

test('every test in test/heavy/ is a heavy case', () => {
  for (const file of testFiles('heavy/')) {
    // Each test's name and options: from `test(` to its function.
    const heads = text(file).match(/\btest\([\s\S]*?async \(/g) ?? [];
    assert.ok(heads.length > 0, `${file} has tests`);
    for (const head of heads) assert.match(head, /HEAVY|\bskip\b/, `${file}: ${head.slice(0, 80)}`);
  }
});
