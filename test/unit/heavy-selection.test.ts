/**
 * `npm test` skips the heavy cases; FLEETGATE_HEAVY_TESTS=1 runs them, each file of test/heavy/ in
 * its own process (test/helpers/heavy.ts). A heavy case in a file elsewhere would run in a shard's
 * shared process, where a case that measures its process's memory reads the other files' garbage.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';

const TEST = new URL('../', import.meta.url);
const HEAVY_IMPORT = /from '\.\.\/helpers\/(heavy|bench-run)\.js'/;

function testFiles(dir: string): string[] {
  return readdirSync(new URL(dir, TEST))
    .filter((file) => file.endsWith('.test.ts'))
    .map((file) => `${dir}${file}`);
}

test('every test file with a heavy case is in test/heavy/, and every file there has one', () => {
  const helpers = readdirSync(new URL('helpers/', TEST)).filter((file) =>
    /from '\.\/heavy\.js'/.test(readFileSync(new URL(`helpers/${file}`, TEST), 'utf8')),
  );
  assert.deepEqual(helpers, ['bench-run.ts'], 'the helpers that pass HEAVY on (HEAVY_IMPORT names them)');
  const heavy = ['unit/', 'integration/', 'e2e/', 'heavy/']
    .flatMap(testFiles)
    .filter((file) => HEAVY_IMPORT.test(readFileSync(new URL(file, TEST), 'utf8')));
  assert.deepEqual(heavy.sort(), testFiles('heavy/').sort());
});
