import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

/** Runs test/helpers/config-cli.ts in a child process from the repository root. */
async function runConfigCli(args: string[], env: NodeJS.ProcessEnv = {}) {
  const cleanEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('FLEETGATE')));
  try {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', 'test/helpers/config-cli.ts', ...args],
      {
        cwd: REPO,
        env: { ...cleanEnv, ...env },
        timeout: 60_000,
      },
    );
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout: string; stderr: string };
    if (typeof failed.code !== 'number') throw error;
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

test('a bad --set value exits 2 with the key and the problem on stderr', async () => {
  const { code, stdout, stderr } = await runConfigCli(['--set', 'routing.policy=fastest']);
  assert.equal(code, 2);
  assert.equal(stdout, '');
  assert.equal(
    stderr,
    'fleetgate: config error: routing.policy: "fastest" is not one of least-loaded, round-robin, power-of-two, prefix-aware, kv-aware, auto (from --set routing.policy)\n',
  );
});

test('an unknown flag exits 2 naming the flag', async () => {
  const { code, stderr } = await runConfigCli(['--lisen', '0.0.0.0:1']);
  assert.equal(code, 2);
  assert.equal(stderr, 'fleetgate: config error: --lisen: unknown flag (did you mean "--listen"?)\n');
});

test('a bad environment value exits 2 naming the variable', async () => {
  const { code, stderr } = await runConfigCli([], { FLEETGATE__HEALTH__INTERVAL: 'fast' });
  assert.equal(code, 2);
  assert.equal(
    stderr,
    'fleetgate: config error: health.interval: "fast" is not a duration (e.g. 500ms, 10s) (from FLEETGATE__HEALTH__INTERVAL)\n',
  );
});

test('a good config exits 0 with the shipped defaults and the overrides applied', async () => {
  const { code, stdout, stderr } = await runConfigCli(['--listen', '127.0.0.1:9000', '--set', 'health.interval=2s']);
  assert.equal(stderr, '');
  assert.equal(code, 0);
  const { path, config } = JSON.parse(stdout);
  assert.equal(path, `${REPO}config/fleetgate.yaml`);
  assert.deepEqual(config.listen, { host: '127.0.0.1', port: 9000 });
  assert.equal(config.health.interval, 2000);
  assert.equal(config.backends.length, 7);
});
