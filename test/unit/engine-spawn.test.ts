/** How an engine is spawned: through `setpriv --pdeathsig` only when it must stop with fleetgate and both programs exist. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { runnable, spawnArgv } from '../../src/launch/engine-process.js';

function binDir(t: { after(fn: () => void): void }, programs: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'fleetgate-bin-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  for (const name of programs) writeFileSync(join(dir, name), '#!/bin/sh\n', { mode: 0o755 });
  writeFileSync(join(dir, 'not-executable'), '', { mode: 0o644 });
  return dir;
}

test('runnable: an executable on PATH or by path; not a missing or non-executable file', (t) => {
  const dir = binDir(t, ['python']);
  assert.equal(runnable('python', dir), true);
  assert.equal(runnable(join(dir, 'python'), ''), true);
  assert.equal(runnable('pythn', dir), false);
  assert.equal(runnable('not-executable', dir), false);
});

test('spawnArgv wraps the engine in setpriv --pdeathsig SIGTERM when it must stop with fleetgate', (t) => {
  const dir = binDir(t, ['python', 'setpriv']);
  const argv = ['python', '-m', 'sglang.launch_server', '--port', '30000'];
  assert.deepEqual(spawnArgv(argv, true, dir), ['setpriv', '--pdeathsig', 'SIGTERM', ...argv]);
  assert.deepEqual(spawnArgv(argv, false, dir), argv, 'on_exit: keep: engines outlive fleetgate');
});

test('spawnArgv leaves the argv alone without setpriv, or when the program is missing (ENOENT stays Node’s)', (t) => {
  const withoutSetpriv = binDir(t, ['python']);
  assert.deepEqual(spawnArgv(['python', '-V'], true, withoutSetpriv), ['python', '-V']);
  const both = binDir(t, ['setpriv']);
  assert.deepEqual(spawnArgv(['pythn', '-V'], true, both), ['pythn', '-V']);
});
