/**
 * The user run, with the `openai` npm SDK as the client: 240 streamed chat completions, 32
 * at a time, over 4 simulated servers, one of them (a child process) SIGKILLed mid-job. With stream
 * resume every request completes, no `APIError`, and each answer is exactly what an uncut stream
 * would have given: its `max_tokens` or its `<sim:len>` stop, text seamless.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI, { APIError } from 'openai';
import { outputText } from '../../src/sim/text-gen.js';
import { createSims, startGateway } from '../helpers/fleet.js';
import { sampleValue } from '../helpers/prometheus-text.js';
import { startSimProcess } from '../helpers/sim-process.js';
import { waitFor } from '../helpers/wait.js';

const REQUESTS = 240;
const CONCURRENCY = 32;
const MAX_TOKENS = 40;
const TOKEN_MS = 20;

test('openai SDK: 240 streams at c=32 through a SIGKILLed server all complete, each as an uncut stream', async (t) => {
  const dying = await startSimProcess(t, 'gpu0', ['--token-ms', String(TOKEN_MS)]);
  const sims = await createSims(
    t,
    [1, 2, 3].map((i) => ({ name: `gpu${i}`, engine: { tokenMs: TOKEN_MS } })),
  );
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady()));
  const { url, gateway } = await startGateway(t, {
    backends: [dying, ...sims].map((b) => ({ url: b.url, name: b.name })),
    health: { starting_interval: '100ms', interval: '1s' },
  });
  await waitFor(() => gateway.fleet.registry.ready.length === 4, { what: 'four backends ready' });
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });

  let next = 0;
  let done = 0;
  const apiErrors: string[] = [];
  const wrong: string[] = [];
  const one = async (i: number) => {
    // Some stop on their own before max_tokens, the others run to it.
    const stopAt = 10 + ((i * 7) % 45);
    const expected = Math.min(stopAt, MAX_TOKENS);
    try {
      const stream = await client.chat.completions.create({
        model: 'default',
        stream: true,
        max_tokens: MAX_TOKENS,
        messages: [{ role: 'user', content: `request ${i} <sim:len=${stopAt}>` }],
      });
      let text = '';
      const finishes: string[] = [];
      for await (const chunk of stream) {
        const choice = chunk.choices[0];
        if (choice?.delta?.content) text += choice.delta.content;
        if (choice?.finish_reason) finishes.push(choice.finish_reason);
      }
      const finish = stopAt < MAX_TOKENS ? 'stop' : 'length';
      if (text !== outputText(expected) || finishes.length !== 1 || finishes[0] !== finish) {
        wrong.push(`#${i}: ${finishes.join(',')} ${JSON.stringify(text.slice(-40))}`);
      }
    } catch (error) {
      if (error instanceof APIError) apiErrors.push(`#${i}: ${error.message}`);
      else throw error;
    } finally {
      done++;
    }
  };
  const started = performance.now();
  const workers = Array.from({ length: CONCURRENCY }, async () => {
    while (next < REQUESTS) await one(next++);
  });
  await waitFor(() => done >= REQUESTS / 3, { what: 'a third of the job', timeoutMs: 60_000 });
  await dying.kill();
  await Promise.all(workers);
  const seconds = (performance.now() - started) / 1000;

  assert.deepEqual(apiErrors, [], 'no APIError');
  assert.deepEqual(wrong, [], 'every answer as an uncut stream gives it');
  assert.equal(done, REQUESTS);
  const resumed = sampleValue(await gateway.metrics.render(), 'fleetgate_stream_resumes_total', {
    backend: 'gpu0',
    reason: 'reset',
  });
  assert.ok((resumed ?? 0) >= 1, `streams cut on gpu0 were resumed (${resumed}) in ${seconds.toFixed(1)} s`);
  t.diagnostic(`${REQUESTS} streams in ${seconds.toFixed(1)} s, ${resumed} resumed`);
});
