/**
 * Stopping `fleetgate launch` with SIGTERM: with `on_exit: stop` no process of any engine's tree is left,
 * not even a child that ignores SIGTERM (SIGKILL after launch.stop_grace); with `keep` they all run on.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { liveGroupMembers } from '../../src/launch/process-group.js';
import {
  alive,
  type LaunchedFleetgate,
  simCommand,
  simWithChildCommand,
  startLaunch,
  waitReady,
} from '../helpers/launch.js';
import { waitFor } from '../helpers/wait.js';

/** Engine pid and the pid of the child it started, for each engine, once all are ready. */
async function trees(fleetgate: LaunchedFleetgate): Promise<{ engine: number; child: number }[]> {
  const names = ['gpu0', 'gpu1'];
  for (const name of names) await waitReady(fleetgate, name);
  return Promise.all(
    names.map(async (name) => {
      const engine = (await fleetgate.backend(name)).supervision?.pid;
      assert.ok(engine);
      const log = readFileSync(`${fleetgate.dir}/logs/sglang_${name}.log`, 'utf8');
      const child = Number(/child pid (\d+)/.exec(log)?.[1]);
      assert.ok(alive(engine) && alive(child), `${name}: engine and its child run`);
      return { engine, child };
    }),
  );
}

test('on_exit: stop (default): SIGTERM to fleetgate leaves no process of any engine tree', async (t) => {
  const fleetgate = await startLaunch(t, {
    engines: 2,
    launch: { command: simWithChildCommand(''), stop_grace: '1s' },
  });
  const pids = await trees(fleetgate);
  fleetgate.child.kill('SIGTERM');
  assert.equal(await fleetgate.exit, 0);
  for (const { engine, child } of pids) {
    assert.ok(!alive(engine), `engine ${engine} stopped`);
    assert.ok(!alive(child), `its child ${child}, which ignores SIGTERM, was killed too`);
    assert.deepEqual(liveGroupMembers(engine), [], 'nothing left in its process group');
  }
  assert.match(fleetgate.output(), /stopping 2 engines/);
});

test('on_exit: keep: the engines and their children run on after fleetgate exits', async (t) => {
  const fleetgate = await startLaunch(t, { engines: 2, launch: { command: simWithChildCommand(''), on_exit: 'keep' } });
  const pids = await trees(fleetgate);
  t.after(() => {
    for (const { engine } of pids) {
      try {
        process.kill(-engine, 'SIGKILL');
      } catch {}
    }
  });
  fleetgate.child.kill('SIGTERM');
  assert.equal(await fleetgate.exit, 0);
  for (const { engine, child } of pids) assert.ok(alive(engine) && alive(child), `${engine} and ${child} still run`);
  assert.match(fleetgate.output(), /engines left running \(gpu0=\d+, gpu1=\d+\)/);
  for (const { engine } of pids) process.kill(-engine, 'SIGKILL');
  await waitFor(() => pids.every(({ engine, child }) => !alive(engine) && !alive(child)), {
    what: 'the test killed them',
  });
});

test('on_exit: stop: an engine stops even when fleetgate is killed with SIGKILL (parent-death signal)', async (t) => {
  const fleetgate = await startLaunch(t, { engines: 1, launch: { command: simCommand('') } });
  await waitReady(fleetgate, 'gpu0');
  const engine = (await fleetgate.backend('gpu0')).supervision?.pid;
  assert.ok(engine && alive(engine));
  fleetgate.child.kill('SIGKILL');
  await fleetgate.exit;
  await waitFor(() => !alive(engine), {
    what: `engine ${engine} stopped after fleetgate was killed`,
    timeoutMs: 15_000,
  });
});
