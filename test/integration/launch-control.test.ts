/**
 * `fleetgate launch` as an operator meets it: config mistakes exit 2 naming the key and start nothing;
 * `fleetgate restart NAME` restarts an engine now; an engine that keeps dying is left `failed` after
 * launch.max_restarts; a backend fleetgate did not start cannot be restarted (409).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startGateway } from '../helpers/fleet.js';
import { alive, REPO, simCommand, startLaunch, waitReady } from '../helpers/launch.js';
import { waitFor } from '../helpers/wait.js';

function fleetgate(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', join(REPO, 'src/cli/index.ts'), ...args],
      { cwd: REPO, env: { ...process.env, FLEETGATE_URL: '', FLEETGATE_ADMIN_TOKEN: '' } },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

test('a bad launch template exits 2 naming the key; so does launch without a launch section', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'launch-config-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const cases: [unknown, RegExp][] = [
    [
      { command: 'python -m sglang.launch_server --port {prot}', ports: 30000 },
      /launch\.command: unknown placeholder \{prot\}/,
    ],
    [{ command: '', ports: 30000 }, /launch\.command: must not be empty/],
    [{ command: 'python x', ports: 30000, log: 'logs/{gpu}.log' }, /launch\.log: unknown placeholder \{gpu\}/],
  ];
  for (const [i, [launch, message]] of cases.entries()) {
    const file = join(dir, `bad${i}.yaml`);
    writeFileSync(file, JSON.stringify({ listen: '127.0.0.1:0', launch }));
    const run = await fleetgate(['launch', '--config', file]);
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, message);
    assert.doesNotMatch(run.stdout, /listening|started/);
  }
  const file = join(dir, 'no-launch.yaml');
  writeFileSync(file, JSON.stringify({ listen: '127.0.0.1:0', backends: ['http://127.0.0.1:9'] }));
  const run = await fleetgate(['launch', '--config', file]);
  assert.equal(run.code, 2);
  assert.match(run.stderr, /no launch: section/);
});

test('fleetgate restart NAME: the engine is stopped and started again at once', async (t) => {
  const launched = await startLaunch(t, { launch: { command: simCommand(''), restart_backoff: '1m' } });
  await waitReady(launched, 'gpu0');
  const old = (await launched.backend('gpu0')).supervision?.pid;
  assert.ok(old);
  const run = await fleetgate(['restart', 'gpu0', '--url', launched.url]);
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /^restarting gpu0: /);
  const after = await waitFor(
    async () => {
      const b = await launched.backend('gpu0');
      return b.state === 'ready' && b.supervision?.pid !== old && b.supervision?.pid ? b : null;
    },
    { what: 'gpu0 ready again with a new process', timeoutMs: 60_000 },
  );
  assert.equal(after.supervision?.restarts, 1);
  assert.ok(!alive(old), 'the old engine is gone');
  const metrics = await (await fetch(`${launched.url}/metrics`)).text();
  assert.match(metrics, /fleetgate_backend_restarts_total\{backend="gpu0",reason="operator"\} 1/);

  const unknown = await fleetgate(['restart', 'gpu9', '--url', launched.url]);
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /404 no backend named "gpu9"/);
});

test('an engine that keeps exiting is restarted max_restarts times, then left failed with the reason', async (t) => {
  const launched = await startLaunch(t, {
    launch: { command: `${process.execPath} -e process.exit(3)`, restart_backoff: '50ms', max_restarts: 2 },
  });
  const failed = await waitFor(
    async () => {
      const b = await launched.backend('gpu0');
      return b.state === 'failed' ? b : null;
    },
    { what: 'gpu0 failed', timeoutMs: 60_000 },
  );
  assert.match(failed.reason ?? '', /gave up after 2 restarts in a row \(launch\.max_restarts\): exited with code 3/);
  assert.equal(failed.supervision?.restarts, 2);
  assert.deepEqual(failed.supervision?.last_exit, { code: 3, signal: null });
  assert.equal(failed.supervision?.pid, null);
  assert.equal(failed.supervision?.next_restart_at, null);
  const status = await fleetgate(['status', '--url', launched.url]);
  assert.match(status.stdout, /engines started by fleetgate launch:/);
  assert.match(status.stdout, /gpu0\s+-\s+2\s+code 3\s+-\s+-/);
});

test('an engine whose port another process holds is reported failed, not restarted, and that process is left alone', async (t) => {
  const squatter = createServer();
  await new Promise<void>((resolve) => squatter.listen(0, '127.0.0.1', resolve));
  t.after(() => squatter.close());
  const port = (squatter.address() as AddressInfo).port;
  const launched = await startLaunch(t, {
    launch: { command: simCommand(''), ports: port, restart_backoff: '1s' },
  });
  const failed = await waitFor(
    async () => {
      const b = await launched.backend('gpu0');
      return b.state === 'failed' && /not restarted/.test(b.reason ?? '') ? b : null;
    },
    { what: 'gpu0 failed, not restarted', timeoutMs: 60_000 },
  );
  assert.match(failed.reason ?? '', new RegExp(`another process holds port ${port} \\(.*address already in use`));
  assert.equal(failed.supervision?.restarts, 0);
  assert.equal(failed.supervision?.pid, null);
  assert.ok(squatter.listening, 'the other process keeps its port');
});

test('restart of a backend fleetgate did not start: 409', async (t) => {
  const { url } = await startGateway(t, { backends: [{ url: 'http://127.0.0.1:9', name: 'gpu0' }] });
  const res = await fetch(`${url}/fleet/backends/gpu0/restart`, { method: 'POST' });
  assert.equal(res.status, 409);
  const body = (await res.json()) as { error: { message: string } };
  assert.match(body.error.message, /was not started by fleetgate launch/);
});
