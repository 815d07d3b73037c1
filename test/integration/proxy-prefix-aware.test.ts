/**
 * prefix-aware through fleetgate over real TCP: a conversation's turns go where its prefix is cached,
 * the simulator reports the hit, fleetgate counts the decisions and shows each backend's hit rate.
 * These check one replica's own rule (`balance_factor: 0`); replicas-affinity.test.ts the hashing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startReadyFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

const SYSTEM = 'You are a patient tutor who explains every step of the proof. '.repeat(12);

async function chat(url: string, messages: object[], headers: Record<string, string> = {}) {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ messages, max_tokens: 3 }),
  });
  assert.equal(res.status, 200);
  return (await res.json()) as { usage: { prompt_tokens_details: { cached_tokens: number } } };
}

test('a conversation follows its cached prefix; decisions and hit rates are visible', async (t) => {
  const { url, gateway, sims } = await startReadyFleet(t, [{}, {}, {}], {
    routing: { policy: 'prefix-aware', load_interval: '50ms', prefix: { balance_factor: 0 } },
  });
  const messages: object[] = [{ role: 'system', content: SYSTEM }];
  const cached: number[] = [];
  for (let turn = 0; turn < 4; turn++) {
    messages.push({ role: 'user', content: `Question ${turn}: why does the induction step hold for n + 1?` });
    cached.push((await chat(url, messages)).usage.prompt_tokens_details.cached_tokens);
    messages.push({ role: 'assistant', content: 'Because the hypothesis covers n.' });
  }
  const served = sims.map((s) => s.counters.completed);
  assert.equal(Math.max(...served), 4, `every turn on one backend: ${served}`);
  assert.equal(cached[0], 0);
  for (const c of cached.slice(1)) assert.ok(c > 100, `later turns hit the cache: ${cached}`);

  const metrics = await (await fetch(`${url}/metrics`)).text();
  assert.match(metrics, /fleetgate_prefix_decisions_total\{decision="cache"\} 3\b/);
  assert.match(metrics, /fleetgate_prefix_decisions_total\{decision="none"\} 1\b/);
  const matched = Number(/fleetgate_prefix_matched_chars_total (\d+)/.exec(metrics)?.[1]);
  assert.ok(matched >= 3 * SYSTEM.length, `matched ${matched} characters`);

  const busy = sims[served.indexOf(4)].name;
  await waitFor(() => (gateway.fleet.registry.get(busy)?.reported?.cacheHitRate ?? 0) > 0, {
    what: `${busy} to report its cache hit rate`,
  });
  const status = (await (await fetch(`${url}/fleet/status`)).json()) as {
    backends: { name: string; cache_hit_rate: number | null }[];
  };
  assert.ok((status.backends.find((b) => b.name === busy)?.cache_hit_rate ?? 0) > 0);
});

test('a backend that leaves rotation takes no more of its conversation; the session header pins one', async (t) => {
  const { url, gateway, sims } = await startReadyFleet(t, [{}, {}], {
    routing: { policy: 'prefix-aware', load_interval: '50ms', prefix: { balance_factor: 0 } },
  });
  const session = { 'x-session-id': 'conversation-7' };
  await chat(url, [{ role: 'user', content: 'short' }], session);
  const first = sims.findIndex((s) => s.counters.completed === 1);
  // A different prompt with the same session key goes to the same backend.
  await chat(url, [{ role: 'user', content: 'another short one' }], session);
  assert.equal(sims[first].counters.completed, 2);

  const drained = await fetch(`${url}/fleet/backends/${sims[first].name}/drain`, { method: 'POST' });
  assert.equal(drained.status, 200);
  await waitFor(() => gateway.fleet.registry.get(sims[first].name)?.state === 'draining', { what: 'drain' });
  await chat(url, [{ role: 'user', content: 'short' }], session);
  assert.equal(sims[1 - first].counters.completed, 1);
});
