/**
 * The CLI as a new user tries it: `--help` on every verb exits 0 with the verb's usage on stdout
 * (`serve` used to answer `--help: unknown flag`, exit 2), and `--version` prints package.json's
 * version. `-h`: cli-usage-short.test.ts (its own file, so each stays within the per-file timeout).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { spawnCli, usageOfEveryVerb, VERBS } from '../helpers/cli.js';

test('every verb answers --help with its usage on stdout and exit 0; serve names its flags', async () => {
  const usages = await usageOfEveryVerb('--help');
  assert.deepEqual([...usages.keys()].sort(), [...VERBS].sort());
  for (const option of ['--config', '--listen', '--backend', '--set', '--log-level']) {
    assert.ok(usages.get('serve')?.includes(`  ${option} `), `serve's usage names ${option}`);
  }
});

test('VERBS is every command fleetgate --help lists, so each gets its usage checked', async () => {
  const run = spawnCli(['--help']);
  assert.equal(await run.closed, 0);
  const commands = run.stdout().split('commands:\n')[1].split('\n\n')[0];
  const listed = [...commands.matchAll(/^ {2}([a-z]+) /gm)].map((m) => m[1]);
  assert.deepEqual(listed.sort(), [...VERBS].sort());
});

test('--version and -v print the version in package.json', async () => {
  const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
  const runs = [spawnCli(['--version']), spawnCli(['-v'])];
  for (const run of runs) {
    assert.equal(await run.closed, 0);
    assert.equal(run.stdout(), `fleetgate ${version}\n`);
  }
});
