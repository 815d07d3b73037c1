/**
 * bench/results holds only the latest summary of each bench the documents cite (issues #33, #53): at
 * most 25 files, older runs in git history, each linked from docs/benchmarks.md (current figures) or
 * CHANGELOG.md's benchmark history, and each
 * named by one scheme: `<bench>[-<variant>]-<YYYY-MM-DD>[-<n>].<ext>`, `n` numbering same-day runs
 * of one variant. Raw runs go to the ignored bench/results/raw/.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { test } from 'node:test';

const root = resolve(import.meta.dirname, '../..');
const MAX_FILES = 25;
const BENCHES = ['overhead', 'balance', 'mixed', 'prefix', 'batch', 'soak', 'cold-start', 'log-parser', 'thinking'];
const NAME = new RegExp(`^(${BENCHES.join('|')})(-[a-z0-9]+)*-\\d{4}-\\d{2}-\\d{2}(-\\d+)?\\.(json|md|txt|svg)$`);

function resultFiles(): string[] {
  return readdirSync(resolve(root, 'bench/results'), { withFileTypes: true })
    .filter((entry) => entry.isFile() && !entry.name.startsWith('.'))
    .map((entry) => entry.name);
}

test('bench/results keeps at most 25 summaries, each cited by docs/benchmarks.md or the changelog', () => {
  const files = resultFiles();
  assert.ok(files.length <= MAX_FILES, `bench/results has ${files.length} files (at most ${MAX_FILES})`);
  const doc = readFileSync(resolve(root, 'docs/benchmarks.md'), 'utf8');
  const changelog = readFileSync(resolve(root, 'CHANGELOG.md'), 'utf8');
  const uncited = files.filter(
    (name) => !doc.includes(`](../bench/results/${name})`) && !changelog.includes(`](bench/results/${name})`),
  );
  assert.deepEqual(uncited, [], 'every file in bench/results is linked from docs/benchmarks.md or CHANGELOG.md');
});

test('every file in bench/results follows <bench>[-<variant>]-<date>[-<n>].<ext>', () => {
  assert.match('balance-fault-c896-2026-12-02-2.json', NAME);
  assert.doesNotMatch('balance-c896-2026-12-02-cap8.json', NAME, 'a branch name is no part of the scheme');
  assert.doesNotMatch('soak-10min-seed1.json', NAME, 'the date is');
  assert.deepEqual(
    resultFiles().filter((name) => !NAME.test(name)),
    [],
  );
});
