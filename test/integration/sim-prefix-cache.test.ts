/** The simulator's prefix cache as a client sees it: cached tokens in `usage` and `meta_info`, and `sglang:cache_hit_rate`. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SimServer } from '../../src/sim/index.js';
import { freePort } from '../helpers/net.js';

test('a repeated conversation reports its cached prefix, in usage, meta_info and /metrics', async (t) => {
  const server = new SimServer({ port: await freePort(), engine: { prefillTokensPerMs: 0 } });
  t.after(() => server.stop());
  server.start();
  await server.whenReady(5000);
  const messages = [
    { role: 'system', content: 'You are a careful assistant. '.repeat(40) },
    { role: 'user', content: 'Summarise the plot of Hamlet.' },
  ];
  const chat = async () => {
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages, max_tokens: 2 }),
    });
    assert.equal(res.status, 200, await res.clone().text());
    return (
      (await res.json()) as { usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } } }
    ).usage;
  };
  const first = await chat();
  const second = await chat();
  assert.equal(first.prompt_tokens_details.cached_tokens, 0);
  assert.ok(second.prompt_tokens_details.cached_tokens >= first.prompt_tokens - 32, JSON.stringify(second));

  // Another role for the same words is another rendered prompt: no hit beyond what is really shared.
  messages[0].role = 'user';
  const otherRole = await chat();
  assert.equal(otherRole.prompt_tokens_details.cached_tokens, 0);

  const gen = await fetch(`${server.url}/generate`, {
    method: 'POST',
    body: JSON.stringify({ text: 'A long shared document. '.repeat(30), sampling_params: { max_new_tokens: 1 } }),
  });
  await gen.text();
  const again = await fetch(`${server.url}/generate`, {
    method: 'POST',
    body: JSON.stringify({ text: 'A long shared document. '.repeat(30), sampling_params: { max_new_tokens: 1 } }),
  });
  const meta = ((await again.json()) as { meta_info: { cached_tokens: number } }).meta_info;
  assert.ok(meta.cached_tokens > 100, JSON.stringify(meta));

  const metrics = await (await fetch(`${server.url}/metrics`)).text();
  const value = (name: string) =>
    Number(/\s(\S+)$/.exec(metrics.split('\n').find((l) => l.startsWith(`${name}{`)) ?? '')?.[1]);
  assert.ok(value('sglang:cache_hit_rate') > 0);
  assert.equal(value('sglang:cached_tokens_total'), second.prompt_tokens_details.cached_tokens + meta.cached_tokens);
});
