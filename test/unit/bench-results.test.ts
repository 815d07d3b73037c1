/**
 * bench/results holds only the summaries the benchmarks document cites (issue #33): at most 26
 * files, each linked from docs/benchmarks.md. Raw runs go to the ignored bench/results/raw/.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { test } from 'node:test';

const root = resolve(import.meta.dirname, '../..');
const MAX_FILES = 26;

test('bench/results keeps at most 26 summaries, each cited by docs/benchmarks.md', () => {
  const files = readdirSync(resolve(root, 'bench/results'), { withFileTypes: true })
    .filter((entry) => entry.isFile() && !entry.name.startsWith('.'))
    .map((entry) => entry.name);
  assert.ok(files.length <= MAX_FILES, `bench/results has ${files.length} files (at most ${MAX_FILES})`);
  const doc = readFileSync(resolve(root, 'docs/benchmarks.md'), 'utf8');
  const uncited = files.filter((name) => !doc.includes(`](../bench/results/${name})`));
  assert.deepEqual(uncited, [], 'every file in bench/results is linked from docs/benchmarks.md');
});
