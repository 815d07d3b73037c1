/**
 * `npm test` skips the heavy cases and `npm run test:heavy` (scripts/heavy-tests.sh) runs the files
 * that import HEAVY, found by their imports: a heavy case reached through a helpers file the script
 * does not name would run nowhere.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';

const helpers = new URL('../helpers/', import.meta.url);

test('scripts/heavy-tests.sh names heavy.ts and every helpers file that imports it', () => {
  const script = readFileSync(new URL('../../scripts/heavy-tests.sh', import.meta.url), 'utf8');
  const named = /helpers\/\(([\w|-]+)\)\\\.js/.exec(script)?.[1].split('|').sort();
  const importers = readdirSync(helpers)
    .filter((file) => /from '\.\/heavy\.js'/.test(readFileSync(new URL(file, helpers), 'utf8')))
    .map((file) => file.replace(/\.ts$/, ''));
  assert.deepEqual(named, ['heavy', ...importers].sort());
});
