/**
 * Engines fleetgate stops restarting: one that keeps exiting is left `failed` after launch.max_restarts;
 * one whose port another process holds is reported, not restarted, and that process is left alone.
 */
import assert from 'node:assert/strict';
import { type AddressInfo, createServer } from 'node:net';
import { test } from 'node:test';
import { runFleetgate, simCommand, startLaunch } from '../helpers/launch.js';
import { waitFor } from '../helpers/wait.js';

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
  const status = await runFleetgate(['status', '--url', launched.url]);
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
