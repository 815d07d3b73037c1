/**
 * Runs one shard of a directory of test files in this one process. A shard file is named
 * `<dir>.<k>-of-<n>.test.ts` and holds only `await runShard(import.meta.url)`: it runs the files
 * of `test/<dir>` at places k, k + n, k + 2n… of their sorted list, one after another, as
 * `node --test` runs the tests of one file. Starting a Node process and loading the source through tsx costs ~1 s of
 * CPU per file, more than most unit files' tests together: a shard pays it once (measured on 2
 * cores: test/unit 54 → 21 s, test/integration 411 → 327 s). One file still runs alone:
 * `node --import tsx --test test/integration/<file>.test.ts`.
 */
import { readdirSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export async function runShard(shardUrl: string): Promise<void> {
  const name = basename(fileURLToPath(shardUrl));
  const match = /^(\w+)\.(\d+)-of-(\d+)\.test\.ts$/.exec(name);
  if (match === null) throw new Error(`${name}: a shard is named <dir>.<k>-of-<n>.test.ts`);
  const [, dir, k, n] = match;
  const files = testFiles(dir);
  for (const [i, file] of files.entries()) if (i % Number(n) === Number(k)) await import(pathToFileURL(file).href);
}

const TEST_ROOT = resolve(import.meta.dirname, '..');

function testFiles(dir: string): string[] {
  return readdirSync(join(TEST_ROOT, dir))
    .filter((file) => file.endsWith('.test.ts'))
    .sort()
    .map((file) => join(TEST_ROOT, dir, file));
}
