/**
 * How a test starts `fleetgate`: the arguments to node before the CLI's own. `dist/cli/index.js`
 * (as installed, as the image runs it) when dist/ is at least as new as src/ (a fresh install, CI,
 * after `npm run build`); else `src/cli/index.ts` through tsx (a change not built yet). The same code
 * either way; the built CLI starts on ~0.3 s of CPU against ~0.7 s through tsx, and the suite starts
 * it a few hundred times (sims, launch, serve, the CLI's verbs).
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

export const REPO = join(import.meta.dirname, '../..');
export const BUILT_CLI = join(REPO, 'dist/cli/index.js');
const SOURCE_CLI = join(REPO, 'src/cli/index.ts');

/** The newest modification time of the files under `dir`, ms. */
function newestIn(dir: string): number {
  const names = readdirSync(dir, { recursive: true, encoding: 'utf8' });
  return Math.max(...names.map((name) => statSync(join(dir, name)).mtimeMs));
}

/** Whether dist/ holds a build of the current src/. */
export function builtIsCurrent(): boolean {
  return existsSync(BUILT_CLI) && newestIn(join(REPO, 'dist')) >= newestIn(join(REPO, 'src'));
}

let entry: readonly string[] | null = null;

/**
 * `[dist/cli/index.js]` or `[--import, <tsx>, src/cli/index.ts]`, decided once per process; tsx by
 * its resolved URL, so that a child started in another directory (a replica's cwd) still finds it.
 */
export function fleetgateEntry(): readonly string[] {
  entry ??= builtIsCurrent() ? [BUILT_CLI] : ['--import', import.meta.resolve('tsx'), SOURCE_CLI];
  return entry;
}
