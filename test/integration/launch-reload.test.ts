/**
 * A reload under `fleetgate launch` applies the file's engines as a diff, as it does the backends: an
 * engine added to the file is started and joins, one removed is stopped (its whole process group),
 * one whose spec changed is stopped and started again from the new spec, and the others keep their
 * process. A file without its `launch` section is refused and nothing stops.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { liveGroupMembers } from '../../src/launch/process-group.js';
import { alive, type LaunchedFleetgate, simCommand, startLaunch, waitReady } from '../helpers/launch.js';
import { freePorts } from '../helpers/net.js';
import { waitFor } from '../helpers/wait.js';

interface ReloadAnswer {
  engines?: { started: string[]; stopped: string[]; restarted: string[] };
  applied?: string[];
  error?: { message: string };
}

/** Reloads from the first config with `launch` changed; `null`: no launch section, gpu0 as a plain backend. */
async function reloadWith(fleetgate: LaunchedFleetgate, launch: Record<string, unknown> | null) {
  const { launch: running, ...rest } = fleetgate.config;
  const gpu0 = { name: 'gpu0', url: (await fleetgate.backend('gpu0')).url };
  fleetgate.rewrite(
    launch === null ? { ...rest, backends: [gpu0] } : { ...rest, launch: { ...(running as object), ...launch } },
  );
  const res = await fetch(`${fleetgate.url}/fleet/reload`, { method: 'POST' });
  return { status: res.status, body: (await res.json()) as ReloadAnswer };
}

const pidOf = async (fleetgate: LaunchedFleetgate, name: string) => {
  const pid = (await fleetgate.backend(name)).supervision?.pid;
  assert.ok(pid, `${name} has a pid`);
  return pid;
};

const gone = (pid: number) => !alive(pid) && liveGroupMembers(pid)?.length === 0;

test('reload under launch starts added engines, stops removed ones, restarts changed ones', async (t) => {
  const fleetgate = await startLaunch(t, { engines: 2, launch: { command: simCommand('') } });
  const ports = (fleetgate.config.launch as { ports: number[] }).ports;
  const [extra, moved] = await freePorts(2);
  for (const name of ['gpu0', 'gpu1']) await waitReady(fleetgate, name);
  const gpu0 = await pidOf(fleetgate, 'gpu0');
  const gpu1 = await pidOf(fleetgate, 'gpu1');

  const added = await reloadWith(fleetgate, { ports: [...ports, extra] });
  assert.equal(added.status, 200);
  assert.deepEqual(added.body.engines, { started: ['gpu2'], stopped: [], restarted: [] });
  assert.ok(added.body.applied?.includes('launch.engines'), JSON.stringify(added.body));
  await waitReady(fleetgate, 'gpu2');
  const gpu2 = await pidOf(fleetgate, 'gpu2');
  assert.equal(await pidOf(fleetgate, 'gpu0'), gpu0, 'an unchanged engine keeps its process');
  assert.equal(await pidOf(fleetgate, 'gpu1'), gpu1);

  const removed = await reloadWith(fleetgate, { ports: [ports[0]] });
  assert.deepEqual(removed.body.engines, { started: [], stopped: ['gpu1', 'gpu2'], restarted: [] });
  await waitFor(() => gone(gpu1) && gone(gpu2), { what: 'the removed engines stopped', timeoutMs: 15_000 });
  assert.deepEqual(
    (await fleetgate.status()).backends.map((b) => b.name),
    ['gpu0'],
  );
  assert.ok(alive(gpu0), 'the engine still in the file runs on');

  const refused = await reloadWith(fleetgate, null);
  assert.equal(refused.status, 400);
  assert.match(refused.body.error?.message ?? '', /launch: is missing/);
  assert.ok(alive(gpu0), 'a refused reload stops nothing');

  const changed = await reloadWith(fleetgate, { ports: [moved] });
  assert.deepEqual(changed.body.engines, { started: [], stopped: [], restarted: ['gpu0'] });
  await waitFor(() => gone(gpu0), { what: 'the old gpu0 stopped', timeoutMs: 15_000 });
  await waitFor(async () => (await fleetgate.backend('gpu0')).url.endsWith(`:${moved}`), { what: 'gpu0 moved' });
  await waitReady(fleetgate, 'gpu0');
  assert.notEqual(await pidOf(fleetgate, 'gpu0'), gpu0, 'the changed engine runs as a new process');
});
