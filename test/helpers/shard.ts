/**
 * Runs one shard of a selection of test files in this one process. A shard file is named
 * `<selection>.<k>-of-<n>.test.ts` and holds only `await runShard(import.meta.url)`: it runs the
 * selected files at places k, k + n, k + 2n… of their sorted list, one after another, as
 * `node --test` runs the tests of one file. A selection is a directory of test/ (`unit`,
 * `integration`), or `heavy`: every test file with a heavy case (one that imports helpers/heavy.js
 * or helpers/bench-run.js). Starting a Node process and loading the source through tsx costs ~1 s of
 * CPU per file, more than most unit files' tests together: a shard pays it once (measured on 2
 * cores: test/unit 54 → 21 s, test/integration 411 → 327 s). One file still runs alone:
 * `node --import tsx --test test/integration/<file>.test.ts`.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export async function runShard(shardUrl: string): Promise<void> {
  const name = basename(fileURLToPath(shardUrl));
  const match = /^(\w+)\.(\d+)-of-(\d+)\.test\.ts$/.exec(name);
  if (match === null) throw new Error(`${name}: a shard is named <dir>.<k>-of-<n>.test.ts`);
  const [, selection, k, n] = match;
  const files = selection === 'heavy' ? heavyFiles() : testFiles(selection);
  for (const [i, file] of files.entries()) if (i % Number(n) === Number(k)) await import(pathToFileURL(file).href);
}

const TEST_ROOT = resolve(import.meta.dirname, '..');

function testFiles(dir: string): string[] {
  return readdirSync(join(TEST_ROOT, dir))
    .filter((file) => file.endsWith('.test.ts'))
    .sort()
    .map((file) => join(TEST_ROOT, dir, file));
}

const HEAVY_IMPORT = /from '\.\.\/helpers\/(heavy|bench-run)\.js'/;

function heavyFiles(): string[] {
  return ['unit', 'integration', 'e2e']
    .flatMap(testFiles)
    .filter((file) => HEAVY_IMPORT.test(readFileSync(file, 'utf8')));
}
