/**
 * Losing one of two fleetgate replicas (real child processes, real signals) under a streamed load:
 * - SIGTERM: its `/readyz` answers 503 from the signal on while the listener stays open, every
 *   stream it holds finishes whole (`data: [DONE]`, no error event), it exits 0; the other replica
 *   serves what the client sends after it.
 * - SIGKILL: its streams are cut (what a client sees), and the other replica serves every later
 *   request.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createSims } from '../helpers/fleet.js';
import { readyz, startReplicas } from '../helpers/replicas.js';
import { waitFor } from '../helpers/wait.js';

interface Stream {
  /** Resolves once the response head arrived. */
  started: Promise<void>;
  /** Resolves with the whole body, or the error that cut it. */
  done: Promise<{ body: string; error: string | null; status: number }>;
}

function stream(url: string, i: number, tokens: number): Stream {
  let onStart: () => void = () => {};
  const started = new Promise<void>((resolve) => {
    onStart = resolve;
  });
  const done = (async () => {
    let status = 0;
    let body = '';
    try {
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          messages: [{ role: 'user', content: `Stream ${i}: describe a river.` }],
          max_tokens: tokens,
          stream: true,
        }),
      });
      status = res.status;
      onStart();
      body = await res.text();
      return { body, error: null, status };
    } catch (error) {
      onStart();
      return { body, error: String((error as Error).cause ?? error), status };
    }
  })();
  return { started, done };
}

const whole = (r: { body: string; error: string | null; status: number }) =>
  r.error === null && r.status === 200 && r.body.trimEnd().endsWith('data: [DONE]') && !r.body.includes('"error"');

async function startFleet(t: Parameters<typeof createSims>[0]) {
  // 40 ms a token: a 40-token stream takes about 1.6 s, long enough to signal a replica mid-stream.
  const sims = await createSims(
    t,
    Array.from({ length: 4 }, () => ({ engine: { tokenMs: 40 } })),
  );
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady()));
  return startReplicas(t, 2, sims, 'shutdown:\n  grace: 20s\n');
}

test('SIGTERM: /readyz 503 from the signal on, every stream the draining replica holds finishes, exit 0', async (t) => {
  const [draining, other] = await startFleet(t);
  const streams = Array.from({ length: 16 }, (_, i) => stream(i % 2 === 0 ? draining.url : other.url, i, 40));
  await Promise.all(streams.map((s) => s.started));

  draining.child.kill('SIGTERM');
  // From the first 503 on, every answer until the process closes its listener is 503.
  const answers: number[] = [];
  await waitFor(
    async () => {
      answers.push(await readyz(draining.url));
      return answers.at(-1) === 503;
    },
    { intervalMs: 5, what: '/readyz 503 after SIGTERM' },
  );
  const polling = (async () => {
    for (;;) {
      try {
        answers.push(await readyz(draining.url));
      } catch {
        return; // the listener closed: the drain is over
      }
    }
  })();
  // Meanwhile the client sends its new requests to the replica still ready.
  const later = await Promise.all(Array.from({ length: 4 }, (_, i) => stream(other.url, 100 + i, 5).done));
  const results = await Promise.all(streams.map((s) => s.done));
  await polling;
  const onDraining = results.filter((_, i) => i % 2 === 0);
  assert.equal(onDraining.filter(whole).length, 8, `every stream on the draining replica finished whole`);
  assert.equal(results.filter(whole).length, 16);
  assert.ok(later.every(whole), 'the other replica served the later requests');
  const first503 = answers.indexOf(503);
  assert.ok(
    answers.slice(first503).every((code) => code === 503),
    `readyz after the signal: ${answers.join(',')}`,
  );
  assert.ok(answers.length - first503 >= 2, 'readyz stayed reachable (503) while streams drained');
  assert.equal(await draining.exited, 0);
});

test('SIGKILL: the killed replica’s streams are cut; the other serves every later request', async (t) => {
  const [killed, other] = await startFleet(t);
  const streams = Array.from({ length: 8 }, (_, i) => stream(killed.url, i, 40));
  await Promise.all(streams.map((s) => s.started));
  killed.child.kill('SIGKILL');
  const cut = await Promise.all(streams.map((s) => s.done));
  assert.ok(
    cut.every((r) => !whole(r)),
    'a client sees its stream on a killed replica end without [DONE]',
  );
  assert.equal(await killed.exited, null);
  // A client (or its retry, through the Service) lands on the other replica: every request served.
  const later = await Promise.all(Array.from({ length: 16 }, (_, i) => stream(other.url, 200 + i, 5).done));
  assert.equal(later.filter(whole).length, 16);
  assert.equal(await readyz(other.url), 200);
});
