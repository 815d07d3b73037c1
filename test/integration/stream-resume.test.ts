/**
 * Stream resume over real TCP: a streamed chat or completions answer whose server is SIGKILLed (a
 * child process) or whose scheduler hangs mid-stream continues on another backend in the same
 * client stream: no error event, one finish_reason, one [DONE], the text exactly the uncut answer
 * (test/helpers/stream-check.ts), usage summed, the continuation's body as docs/stream-resume.md
 * says (checked on what the second server received). The cases that must not resume still end
 * with the error event.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import type { Socket } from 'node:net';
import { test } from 'node:test';
import { countPromptTokens, outputText } from '../../src/sim/text-gen.js';
import { createSims } from '../helpers/fleet.js';
import { sampleValue } from '../helpers/prometheus-text.js';
import { chunk, metricOf, RESUME_HEALTH, rawPair, resumeFleet, sseThenClose } from '../helpers/resume-fleet.js';
import { startSimProcess } from '../helpers/sim-process.js';
import { assertWholeStream } from '../helpers/stream-check.js';
import { streamFrom } from '../helpers/streamed-request.js';
import { waitFor } from '../helpers/wait.js';

const MAX_TOKENS = 120;

const CASES = [
  {
    api: 'chat',
    path: '/v1/chat/completions',
    body: {
      model: 'default',
      stream: true,
      max_tokens: MAX_TOKENS,
      temperature: 0.7,
      messages: [{ role: 'user', content: 'Tell me about Paris' }],
    },
  },
  {
    api: 'completions',
    path: '/v1/completions',
    body: {
      model: 'default',
      stream: true,
      max_tokens: MAX_TOKENS,
      temperature: 0.7,
      prompt: 'Tell me about France:',
      stream_options: { include_usage: true },
    },
  },
] as const;

for (const { api, path, body } of CASES) {
  test(`${api}: a server SIGKILLed mid-stream; the stream continues on another backend, seamless`, async (t) => {
    const dying = await startSimProcess(t, 'gpu0', ['--token-ms', '40']);
    const fleet = await resumeFleet(t, dying);
    const stream = streamFrom(fleet.url, path, body);
    await stream.atTokens(5);
    await fleet.admitSpare();
    await dying.kill();
    const got = await stream.done;

    assert.equal(got.status, 200);
    assertWholeStream(got, MAX_TOKENS);
    assert.deepEqual(got.comments, ['resumed on gpu1 after gpu0 failed']);
    // The cut part is what reached the client before the join; the spare got exactly that back.
    const cutPart = got.body.slice(0, got.body.indexOf(': resumed'));
    const sent = (cutPart.match(/"(content|text)":"[^"]/g) ?? []).length;
    assert.ok(sent >= 5 && sent < MAX_TOKENS, `cut after ${sent} tokens`);
    assert.equal(fleet.spareBodies.length, 1, 'one continuation');
    const continuation = fleet.spareBodies[0];
    assert.equal(continuation.max_tokens, MAX_TOKENS - sent, 'the budget shrinks by the tokens sent');
    assert.equal(continuation.temperature, 0.7, 'the same sampling parameters');
    if (api === 'chat') {
      assert.deepEqual(continuation.messages, [...body.messages, { role: 'assistant', content: outputText(sent) }]);
      assert.equal(continuation.continue_final_message, true);
      assert.equal(continuation.add_generation_prompt, false);
    } else {
      assert.equal(continuation.prompt, body.prompt + outputText(sent));
      // Usage sums the attempts and keeps the original prompt's count.
      const promptTokens = countPromptTokens(body.prompt);
      assert.deepEqual(
        { ...got.usage, prompt_tokens_details: undefined, reasoning_tokens: undefined },
        {
          prompt_tokens: promptTokens,
          completion_tokens: MAX_TOKENS,
          total_tokens: promptTokens + MAX_TOKENS,
          prompt_tokens_details: undefined,
          reasoning_tokens: undefined,
        },
      );
    }
    assert.equal(
      await metricOf(fleet.gateway, 'fleetgate_stream_resumes_total', { backend: 'gpu0', reason: 'reset' }),
      1,
    );
  });
}

test('a stream that stops at its <sim:len> stop across a resume ends where the uncut one would', async (t) => {
  const dying = await startSimProcess(t, 'gpu0', ['--token-ms', '40']);
  const fleet = await resumeFleet(t, dying);
  const records: Array<{ resumes: number; backends: readonly string[] }> = [];
  fleet.gateway.events.on('request', (r) => records.push(r));
  const stream = streamFrom(fleet.url, '/v1/chat/completions', {
    model: 'default',
    stream: true,
    max_tokens: 500,
    messages: [{ role: 'user', content: 'Short answer <sim:len=60>' }],
  });
  await stream.atTokens(5);
  await fleet.admitSpare();
  await dying.kill();
  const got = await stream.done;
  assertWholeStream(got, 60);
  assert.deepEqual(got.finishReasons, ['stop']);
  await waitFor(() => records.length === 1, { what: 'the access record' });
  assert.equal(records[0].resumes, 1);
  assert.deepEqual(records[0].backends, ['gpu0', 'gpu1'], 'the backends in order');
});

test('progress watchdog: a scheduler hung mid-stream (HTTP up) has its stream resumed within progress_timeout + 5 s', async (t) => {
  const progressMs = 1_500;
  const [stuck] = await createSims(t, [{ name: 'gpu0', version: 'old', engine: { tokenMs: 40 } }]);
  stuck.start();
  await stuck.whenReady();
  const fleet = await resumeFleet(t, stuck, {
    health: { ...RESUME_HEALTH, progress_timeout: `${progressMs}ms` },
    routing: { load_interval: '100ms' },
  });
  const stream = streamFrom(fleet.url, '/v1/chat/completions', {
    model: 'default',
    stream: true,
    max_tokens: MAX_TOKENS,
    stream_options: { include_usage: true },
    messages: [{ role: 'user', content: 'Tell me about Paris' }],
  });
  await stream.atTokens(5);
  await fleet.admitSpare();
  stuck.killScheduler();
  const hungAt = performance.now();
  const got = await stream.done;
  const took = performance.now() - hungAt;
  assert.ok(took <= progressMs + 5_000, `resumed and finished ${Math.round(took)} ms after the hang`);
  assertWholeStream(got, MAX_TOKENS);
  assert.equal(got.usage?.completion_tokens, MAX_TOKENS, 'usage sums the attempts');
  assert.equal(
    await metricOf(fleet.gateway, 'fleetgate_stream_resumes_total', { backend: 'gpu0', reason: 'no_progress' }),
    1,
  );
});

const REFUSED = [
  {
    what: 'n > 1',
    reason: 'n',
    headers: {},
    raw: {},
    body: { n: 2 },
  },
  {
    what: 'the header x-fleetgate-resume: off',
    reason: null,
    headers: { 'x-fleetgate-resume': 'off' },
    raw: {},
    body: {},
  },
  {
    what: 'retry.resume_limit 0',
    reason: null,
    headers: {},
    raw: { retry: { resume_limit: 0 } },
    body: {},
  },
] as const;

for (const { what, reason, headers, raw, body } of REFUSED) {
  test(`not resumed (${what}): the error event stands, no [DONE]`, async (t) => {
    const dying = await startSimProcess(t, 'gpu0', ['--token-ms', '40']);
    const fleet = await resumeFleet(t, dying, raw);
    const stream = streamFrom(
      fleet.url,
      '/v1/chat/completions',
      { model: 'default', stream: true, max_tokens: MAX_TOKENS, messages: [{ role: 'user', content: 'hi' }], ...body },
      headers,
    );
    await stream.atTokens(3);
    await fleet.admitSpare();
    await dying.kill();
    const got = await stream.done;
    assert.equal(got.errors, 1, 'one error event');
    assert.equal(got.done, 0, 'no [DONE]');
    assert.equal(fleet.spareBodies.length, 0, 'no continuation sent');
    if (reason !== null) {
      assert.equal(await metricOf(fleet.gateway, 'fleetgate_stream_resume_failures_total', { reason }), 1);
    }
  });
}

const RAW_CHAT = { model: 'm', stream: true, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] };

test('an upstream error event mid-stream, or a stream closed before [DONE], is resumed; the client sees neither', async (t) => {
  const { url, gateway } = await rawPair(t, (socket, n, body) => {
    if (n === 0) {
      return sseThenClose(
        socket,
        [chunk('x', { role: 'assistant', content: '' }), chunk('x', { content: 'A' })],
        'data: {"error":{"message":"oom"}}\n\n',
      );
    }
    if (n === 1)
      return sseThenClose(socket, [chunk('y', { role: 'assistant', content: '' }), chunk('y', { content: 'B' })]);
    assert.equal(body.messages.at(-1)?.content, 'AB', 'the second continuation carries both parts');
    sseThenClose(
      socket,
      [chunk('z', { role: 'assistant', content: '' }), chunk('z', { content: 'C' }), chunk('z', {}, 'stop')],
      'data: [DONE]\n\n',
    );
  });
  const got = await streamFrom(url, '/v1/chat/completions', RAW_CHAT).done;
  assert.equal(got.errors, 0);
  assert.equal(got.text, 'ABC');
  assert.deepEqual([...got.ids], ['x']);
  assert.equal(got.roles, 1);
  assert.equal(got.done, 1);
  const text = await gateway.metrics.render();
  const resumes = (reason: string) =>
    ['a', 'b'].reduce(
      (sum, backend) => sum + (sampleValue(text, 'fleetgate_stream_resumes_total', { backend, reason }) ?? 0),
      0,
    );
  assert.equal(resumes('error_event'), 1);
  assert.equal(resumes('closed'), 1);
});

test('a client that leaves while its continuation is sought: no resume failure counted', async (t) => {
  const continuations: Socket[] = [];
  const closed: Socket[] = [];
  const { url, gateway } = await rawPair(t, (socket, n) => {
    if (n === 0) {
      socket.write(
        `HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n` +
          [chunk('x', { role: 'assistant', content: '' }), chunk('x', { content: 'A' })]
            .map((e) => `data: ${JSON.stringify(e)}\n\n`)
            .join(''),
      );
      socket.end('data: {"error":{"message":"oom"}}\n\n');
      return;
    }
    // The continuation: held unanswered until fleetgate lets it go.
    continuations.push(socket);
    socket.on('close', () => closed.push(socket));
  });
  t.after(() => {
    for (const socket of continuations) socket.destroy();
  });
  const client = request(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
  });
  client.on('response', (res) => res.resume().on('error', () => {}));
  client.on('error', () => {});
  client.end(JSON.stringify(RAW_CHAT));
  await waitFor(() => continuations.length === 1, { what: 'the continuation sent' });
  client.destroy();
  // fleetgate drops the continuation it no longer wants; its outcome is settled by then.
  await waitFor(() => closed.length === 1, { what: 'the continuation let go' });
  for (const reason of ['rejected', 'no_backend']) {
    assert.equal(await metricOf(gateway, 'fleetgate_stream_resume_failures_total', { reason }), 0, reason);
  }
});

test('not resumed (tool_calls streamed): the error event stands', async (t) => {
  const { url, gateway, seen } = await rawPair(t, (socket) =>
    sseThenClose(socket, [
      chunk('x', { role: 'assistant', tool_calls: [{ index: 0, id: 'c', function: { name: 'f', arguments: '{"a' } }] }),
    ]),
  );
  const got = await streamFrom(url, '/v1/chat/completions', RAW_CHAT).done;
  assert.equal(got.errors, 1);
  assert.equal(got.done, 0);
  assert.equal(seen(), 1, 'no continuation sent');
  assert.equal(await metricOf(gateway, 'fleetgate_stream_resume_failures_total', { reason: 'tool_calls' }), 1);
});

test('not resumed (retry.resume_limit reached): the error event stands after the last continuation', async (t) => {
  const { url, gateway, seen } = await rawPair(
    t,
    (socket) => sseThenClose(socket, [chunk('x', { role: 'assistant', content: '' }), chunk('x', { content: 'A' })]),
    { retry: { resume_limit: 1 } },
  );
  const got = await streamFrom(url, '/v1/chat/completions', RAW_CHAT).done;
  assert.equal(got.errors, 1);
  assert.equal(got.done, 0);
  assert.equal(got.text, 'AA', 'the first attempt and its one continuation');
  assert.equal(seen(), 2);
  assert.equal(await metricOf(gateway, 'fleetgate_stream_resume_failures_total', { reason: 'limit' }), 1);
});
