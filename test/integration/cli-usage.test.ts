/**
 * The CLI as a new user tries it: `--help` and `-h` on every verb exit 0 with the verb's usage on
 * stdout (`serve` used to answer `--help: unknown flag`, exit 2), and `--version` prints
 * package.json's version.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { spawnCli } from '../helpers/cli.js';

const VERBS = ['serve', 'status', 'wait', 'drain', 'resume', 'demo', 'sim'];

async function usageOf(verb: string, flag: string): Promise<string> {
  // serve: after other flags too, and it starts nothing (the usage is all it prints).
  const run = spawnCli(verb === 'serve' ? [verb, '--listen', '127.0.0.1:0', flag] : [verb, flag]);
  const code = await run.closed;
  assert.equal(code, 0, `fleetgate ${verb} ${flag}: exit ${code}, stderr ${run.stderr()}`);
  assert.equal(run.stderr(), '', `fleetgate ${verb} ${flag} writes nothing to stderr`);
  assert.match(run.stdout(), new RegExp(`^usage: fleetgate ${verb} `), `fleetgate ${verb} ${flag}`);
  return run.stdout();
}

for (const flag of ['--help', '-h']) {
  test(`every verb answers ${flag} with its usage on stdout and exit 0`, async () => {
    // Two at a time: each is a Node process compiling TypeScript, on a machine running other tests.
    const usages = new Map<string, string>();
    for (let i = 0; i < VERBS.length; i += 2) {
      await Promise.all(VERBS.slice(i, i + 2).map(async (verb) => usages.set(verb, await usageOf(verb, flag))));
    }
    for (const option of ['--config', '--listen', '--backend', '--set', '--log-level']) {
      assert.ok(usages.get('serve')?.includes(`  ${option} `), `serve's usage names ${option}`);
    }
  });
}

test('--version and -v print the version in package.json', async () => {
  const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
  const runs = [spawnCli(['--version']), spawnCli(['-v'])];
  for (const run of runs) {
    assert.equal(await run.closed, 0);
    assert.equal(run.stdout(), `fleetgate ${version}\n`);
  }
});
