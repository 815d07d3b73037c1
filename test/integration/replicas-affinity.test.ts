/**
 * Several fleetgate processes with prefix-aware routing over the same 4 simulated backends, as a
 * round-robin Service spreads a client's requests: conversations whose turns alternate between the
 * replicas stay on one backend (at least 3 of 4; rendezvous hashing of the prefix key, with nothing
 * shared between the processes), while unique prompts sent at once still spread (no backend over
 * 1.4x the mean, none under 0.6x). That replicas with `balance_factor: 0` (each its own record) disagree is shown in
 * test/unit/rendezvous.test.ts: over sockets, their per-process choices may agree by chance.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SimServer } from '../../src/sim/index.js';
import { createSims } from '../helpers/fleet.js';
import { startReplicas } from '../helpers/replicas.js';
import { waitFor } from '../helpers/wait.js';

const SYSTEM = 'You are a travel guide who answers with three suggestions and a short reason each. '.repeat(8);
/**
 * `routing.replicas` set to the count, as docs/replicas.md says to. No warm-up: its burst's last
 * load reports (queues of one-token streams) would still be read when the first turns arrive.
 */
const ROUTING = (factor: number, replicas: number) =>
  `routing:\n  policy: prefix-aware\n  load_interval: 50ms\n  replicas: ${replicas}\n  prefix:\n    balance_factor: ${factor}\nupstream:\n  warm_up: false\n`;

/** 8 batch slots each: more than the 4 conversations can ever hold at once, so a load report one interval old (finished turns still counted) cannot fill a home; 64 prompts at once still fill them twice over. */
const SLOTS = 8;
async function readySims(t: Parameters<typeof createSims>[0]): Promise<SimServer[]> {
  const sims = await createSims(
    t,
    Array.from({ length: 4 }, () => ({ engine: { maxRunningRequests: SLOTS } })),
  );
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady()));
  return sims;
}

/**
 * /readyz says 200 from the first ready backend on, and a backend not read yet holds the unread cap
 * (1 per replica here), which would send a turn off its home. Each replica has every backend ready
 * and its cap learned from its first report (`max_running_requests` + 2) before a turn is sent.
 */
async function untilLoadRead(urls: string[], sims: SimServer[]): Promise<void> {
  for (const url of urls)
    await waitFor(
      async () => {
        const status = (await (await fetch(`${url}/fleet/status`)).json()) as {
          backends: Array<{ state: string; inflight_cap: number | null }>;
        };
        return (
          status.backends.length === sims.length &&
          status.backends.every((b) => b.state === 'ready' && b.inflight_cap === SLOTS + 2)
        );
      },
      { what: `${url}: every backend ready and read` },
    );
}

interface Usage {
  prompt_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

async function chat(url: string, messages: object[], maxTokens = 3): Promise<Usage> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens: maxTokens }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  return ((await res.json()) as { usage: Usage }).usage;
}

const UNIQUE = 64;

/** The simulator's cache page: a turn found its conversation cached when all but the last page of the previous turn's prompt was. */
const PAGE = 16;

/**
 * 4 conversations of 4 turns under way at once, turn t of conversation c through replica
 * (c + t) mod n. Whether each stayed on one backend is read from what the backends answered: every
 * later turn found the whole previous turn cached (a move finds at most the shared system prompt).
 */
async function alternatingConversations(urls: string[]): Promise<boolean[]> {
  const conversation = async (c: number) => {
    const messages: object[] = [{ role: 'system', content: SYSTEM }];
    let previous = 0;
    let stayed = true;
    for (let turn = 0; turn < 4; turn++) {
      const question = `Conversation ${c}, question ${turn}: where should I eat, walk and sleep in Lyon? `.repeat(3);
      messages.push({ role: 'user', content: question });
      const usage = await chat(urls[(c + turn) % urls.length], messages);
      if (turn > 0 && usage.prompt_tokens_details.cached_tokens < previous - PAGE) stayed = false;
      previous = usage.prompt_tokens;
      messages.push({ role: 'assistant', content: 'Try a bouchon near Saint-Jean; book ahead.' });
    }
    return stayed;
  };
  return Promise.all([0, 1, 2, 3].map(conversation));
}

/** What each replica decided and retried, for a failure's message. */
async function routingCounters(urls: string[]): Promise<string> {
  const wanted = /^fleetgate_(prefix_decisions|retries|upstream_errors|stream_resumes)_total\{/;
  const texts = await Promise.all(urls.map(async (url) => (await fetch(`${url}/metrics`)).text()));
  return texts
    .map(
      (text, i) =>
        `replica ${i}: ${text
          .split('\n')
          .filter((line) => wanted.test(line))
          .join('; ')}`,
    )
    .join(' | ');
}

for (const count of [2, 3]) {
  test(`${count} replicas: conversations alternating between them stay on one backend; unique prompts spread`, async (t) => {
    const sims = await readySims(t);
    const replicas = await startReplicas(t, count, sims, ROUTING(1.25, count));
    const urls = replicas.map((r) => r.url);
    await untilLoadRead(urls, sims);
    // At most one may move: on a busy machine a sim in this process may report two turns that
    // arrived between its scheduler steps as a queue (QUEUE_ALLOWANCE), and the bound then rightly
    // sends a turn elsewhere (seen once in a full run: one `bound` decision). Without the shared hash
    // (each replica its own record), two of each conversation's turns go through replicas that never
    // saw it and pick by load among 4 backends: three of four conversations staying is then unlikely.
    const stayed = await alternatingConversations(urls);
    assert.ok(
      stayed.filter(Boolean).length >= 3,
      `conversations that kept their backend (and cache): ${stayed.join('/')}; ${await routingCounters(urls)}`,
    );

    // 64 unique prompts at once (twice the fleet's 32 slots), spread over the replicas: hashing alone
    // would leave some backend over the mean by chance; the load bound keeps it within 1.3x. Each
    // replica counts its own dispatches since the last report N times, so N replicas do not all fill
    // the same idle slots before the next report (48 prompts, 3 replicas counting once: 7/12/12/17).
    // Past the first 32, a freed slot goes to the next waiter (work-conserving): with 48, a backend
    // that finished its batch first once took 8 of the 16 waiting (16/12/10/10); with 64, 14/15/14/21
    // (CI). So completions are held to 1.4x the mean, and none starves (at least 0.6x).
    const before = sims.map((sim) => sim.counters.completed);
    await Promise.all(
      Array.from({ length: UNIQUE }, (_, i) =>
        chat(urls[i % urls.length], [{ role: 'user', content: `Unique prompt ${i}: a fact about rivers.` }], 20),
      ),
    );
    const spread = sims.map((sim, i) => sim.counters.completed - before[i]);
    const mean = UNIQUE / sims.length;
    t.diagnostic(`per backend ${spread.join('/')}`);
    assert.ok(Math.max(...spread) <= 1.4 * mean, `over 1.4x the mean: ${spread.join('/')}`);
    assert.ok(Math.min(...spread) >= 0.6 * mean, `under 0.6x the mean: ${spread.join('/')}`);
  });
}
