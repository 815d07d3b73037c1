/**
 * A backend killed under load is ejected; non-streaming requests see no errors (re-sent to another
 * backend because no response byte had reached the client); restarted, it is re-admitted and gets
 * traffic again.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { backendsFor, createSims, startGateway, stateOf } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

test('a backend crashing under load costs non-streaming clients nothing, and it rejoins', async (t) => {
  const sims = await createSims(t, [
    { engine: { tokenMs: 5 } },
    { engine: { tokenMs: 5 } },
    { engine: { tokenMs: 5 } },
  ]);
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady(10_000)));
  const { url, gateway } = await startGateway(t, {
    backends: backendsFor(sims),
    health: { starting_interval: '100ms', interval: '300ms' },
  });
  await waitFor(() => gateway.fleet.registry.ready.length === 3, { what: 'all ready' });
  let retries = 0;
  gateway.events.on('retry', () => retries++);

  let stop = false;
  const failures: string[] = [];
  let done = 0;
  const client = async () => {
    while (!stop) {
      const res = await request(`${url}/generate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ text: 'hello', sampling_params: { max_new_tokens: 20 } }),
      });
      const body = await res.body.text();
      if (res.statusCode !== 200) failures.push(`${res.statusCode} ${body}`);
      else if (!JSON.parse(body).meta_info) failures.push(`incomplete body ${body}`);
      done++;
    }
  };
  const clients = Array.from({ length: 12 }, client);

  const victim = sims[1];
  await waitFor(() => victim.counters.requests > 10, { what: 'traffic on the victim' });
  const inFlightAtCrash = victim.counters.requests - victim.counters.completed;
  await victim.crash();
  await waitFor(() => stateOf(gateway, victim.name) !== 'ready', { timeoutMs: 3_000, what: 'ejection' });
  const afterCrash = done;
  await waitFor(() => done > afterCrash + 50, { what: 'load continuing on the others' });

  const requestsBeforeRestart = victim.counters.requests;
  await victim.restart();
  await waitFor(() => stateOf(gateway, victim.name) === 'ready', { timeoutMs: 10_000, what: 're-admission' });
  await waitFor(() => victim.counters.requests > requestsBeforeRestart + 5, { what: 'traffic after rejoin' });
  stop = true;
  await Promise.all(clients);

  assert.ok(inFlightAtCrash > 0, 'the crash cut requests in flight');
  assert.deepEqual(failures, [], 'no client-visible errors');
  assert.ok(retries > 0, 'the cut requests were re-sent to another backend');
});
