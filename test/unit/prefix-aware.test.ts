/** The prefix-aware policy, its record and the request traits it routes on: injected clock, no sockets. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LeastLoaded } from '../../src/routing/policies/basic-policies.js';
import type { Candidate } from '../../src/routing/policies/policy-contract.js';
import { PrefixAware, type PrefixAwareOptions } from '../../src/routing/policies/prefix-aware.js';
import { PrefixRecord } from '../../src/routing/policies/prefix-record.js';
import { type PromptTraits, promptTraits } from '../../src/routing/request-traits.js';
import { blockHashes } from '../../src/routing/text-hash.js';

const BLOCK = 16;

function setup(overrides: Partial<PrefixAwareOptions> = {}) {
  const clock = { now: 0 };
  const policy = new PrefixAware(
    {
      maxBlocks: 10_000,
      ttlMs: 60_000,
      minMatch: 0.3,
      loadGap: 4,
      loadRatio: 1.5,
      balanceFactor: 0,
      now: () => clock.now,
      ...overrides,
    },
    new LeastLoaded(),
  );
  return { clock, policy };
}

function backends(loads: number[], kvTokens: number | null = null): Candidate[] {
  return loads.map((load, i) => ({ name: `b${i}`, load, kvTokens }));
}

function traits(text: string, session?: string): PromptTraits {
  return { prefix: blockHashes(text, BLOCK), blockChars: BLOCK, session };
}

const SYSTEM = 'You are a helpful assistant who answers in French. '.repeat(4);
const turn = (n: number) => `${SYSTEM}${'user question and model answer number '.repeat(n)}`;

describe('prefix-aware', () => {
  test('the longest recorded match wins, whatever the load order', () => {
    const { policy } = setup();
    const list = backends([0, 0, 0]);
    policy.onDispatch(list[1], traits(turn(1)));
    policy.onDispatch(list[2], traits(turn(3)));
    // Turn 4 shares turn 3's whole text with b2, only turn 1's with b1.
    assert.equal(policy.pick(backends([0, 0, 1]), traits(turn(4))).name, 'b2');
    assert.equal(policy.stats.decisions.cache, 1);
    assert.ok(policy.stats.matchedChars >= turn(3).length - BLOCK);
    // Nothing of an unrelated prompt is recorded: least-loaded decides.
    assert.equal(policy.pick(backends([3, 1, 2]), traits('a different prompt entirely, '.repeat(10))).name, 'b1');
    assert.equal(policy.stats.decisions.none, 1);
  });

  test('a match below min_match of the prompt does not decide', () => {
    const { policy } = setup({ minMatch: 0.5 });
    const list = backends([0, 0]);
    policy.onDispatch(list[0], traits(SYSTEM));
    const long = `${SYSTEM}${'a long unique document '.repeat(40)}`;
    assert.equal(policy.pick(backends([1, 0]), traits(long)).name, 'b1');
    assert.equal(policy.stats.decisions.none, 1);
  });

  test('a prefix the least-loaded backend holds too does not pull the request away from it', () => {
    const { policy } = setup({ minMatch: 0.3 });
    const list = backends([0, 0]);
    policy.onDispatch(list[0], traits(turn(3)));
    policy.onDispatch(list[1], traits(SYSTEM));
    // b0 matches turn 3 whole, b1 only the system prompt (well under 30 % of turn 3): the cache wins.
    assert.equal(policy.pick(backends([2, 0]), traits(turn(3))).name, 'b0');
    // Turn 1 is all on b0, but b1 holds its system prompt, 12 of its 15 blocks: b0 adds only 20 %
    // (under min_match), so load decides.
    assert.equal(policy.pick(backends([2, 0]), traits(turn(1))).name, 'b1');
    assert.equal(policy.stats.decisions.none, 1);
  });

  test('the load guard overrides a hot backend, and only past both thresholds', () => {
    const { policy } = setup({ loadGap: 4, loadRatio: 1.5 });
    policy.onDispatch(backends([0])[0], traits(turn(2)));
    // 5 more than the least (gap > 4) and 6x it: load wins.
    assert.equal(policy.pick(backends([6, 1]), traits(turn(2))).name, 'b1');
    assert.equal(policy.stats.decisions.load, 1);
    // Gap 4 is not more than 4: the cache still wins.
    assert.equal(policy.pick(backends([5, 1]), traits(turn(2))).name, 'b0');
    // Gap 10 but only 1.4x the least: the cache still wins.
    assert.equal(policy.pick(backends([35, 25]), traits(turn(2))).name, 'b0');
    assert.equal(policy.stats.decisions.cache, 2);
  });

  test("the load guard spares a session's backend while it has an idle batch slot, not a mere match", () => {
    const { policy } = setup({ loadGap: 4, loadRatio: 1.5 });
    policy.onDispatch(backends([0])[0], traits(turn(2), 'conv-3'));
    const hot = (idleSlot: boolean): Candidate[] => [
      { name: 'b0', load: 12, idleSlot },
      { name: 'b1', load: 1, idleSlot: true },
    ];
    // Past both thresholds, but b0 still runs fewer than its batch slots: it starts the turn at
    // once, so the conversation stays where it is cached.
    assert.equal(policy.pick(hot(true), traits(turn(3), 'conv-3')).name, 'b0');
    assert.equal(policy.stats.decisions.session, 1);
    // Without a session the same match is guarded as before: load wins.
    assert.equal(policy.pick(hot(true), traits(turn(3))).name, 'b1');
    assert.equal(policy.stats.decisions.load, 1);
    // Once b0 would queue the turn, load wins for the session too.
    assert.equal(policy.pick(hot(false), traits(turn(3), 'conv-3')).name, 'b1');
    assert.deepEqual(policy.stats.decisions, { session: 1, cache: 0, load: 2, none: 0, home: 0, bound: 0 });
  });

  test('a match does not take a request off an idle batch slot onto a backend that would queue it', () => {
    const { policy } = setup({ loadGap: 4, loadRatio: 1.5 });
    policy.onDispatch(backends([0])[0], traits(turn(3)));
    policy.onDispatch(backends([0])[0], traits(turn(3), 'conv-7'));
    // Well within both thresholds (gap 2): only the slots differ.
    const fleet = (matchedIdle: boolean): Candidate[] => [
      { name: 'b0', load: 3, idleSlot: matchedIdle },
      { name: 'b1', load: 1, idleSlot: true },
    ];
    assert.equal(policy.pick(fleet(true), traits(turn(3))).name, 'b0');
    assert.equal(policy.stats.decisions.cache, 1);
    assert.equal(policy.pick(fleet(false), traits(turn(3))).name, 'b1');
    assert.equal(policy.stats.decisions.load, 1);
    // A session's backend keeps its conversation under the thresholds, idle slot or not.
    assert.equal(policy.pick(fleet(false), traits(turn(4), 'conv-7')).name, 'b0');
    assert.deepEqual(policy.stats.decisions, { session: 1, cache: 1, load: 1, none: 0, home: 0, bound: 0 });
  });

  test('the record ages out after the ttl', () => {
    const { clock, policy } = setup({ ttlMs: 1_000 });
    const list = backends([0, 0]);
    policy.onDispatch(list[0], traits(turn(2)));
    clock.now = 999;
    assert.equal(policy.pick(backends([1, 0]), traits(turn(2))).name, 'b0');
    clock.now = 2_000;
    assert.equal(policy.pick(backends([1, 0]), traits(turn(2))).name, 'b1');
  });

  test('the record stays within its memory bound and within what the KV cache can hold', () => {
    const { policy } = setup({ maxBlocks: 100 });
    const [b0] = backends([0]);
    for (let i = 0; i < 50; i++) policy.onDispatch(b0, traits(`prompt ${i} `.repeat(20)));
    assert.equal(policy.recordSize('b0'), 100);
    // 64 KV tokens hold 64 * 4 / 16 = 16 blocks: the backend evicts beyond that, so does the record.
    const [small] = backends([0], 64);
    for (let i = 0; i < 50; i++) policy.onDispatch(small, traits(`prompt ${i} `.repeat(20)));
    assert.equal(policy.recordSize('b0'), 16);
  });

  test('a backend that leaves rotation forgets its record and its sessions', () => {
    const { policy } = setup();
    const list = backends([0, 0]);
    policy.onDispatch(list[0], traits(turn(2), 'conv-1'));
    policy.forget('b0');
    assert.equal(policy.recordSize('b0'), 0);
    assert.equal(policy.pick(backends([1, 0]), traits(turn(2), 'conv-1')).name, 'b1');
    assert.equal(policy.stats.decisions.none, 1);
  });

  test('a session key pins the conversation, unless its backend is overloaded', () => {
    const { policy } = setup({ loadGap: 4 });
    const list = backends([0, 0]);
    policy.onDispatch(list[1], { session: 'conv-9' });
    assert.equal(policy.pick(backends([0, 2]), { session: 'conv-9' }).name, 'b1');
    assert.equal(policy.stats.decisions.session, 1);
    assert.equal(policy.pick(backends([0, 9]), { session: 'conv-9' }).name, 'b0');
  });
});

describe('prefix record', () => {
  test('drops the tail of an old prefix before its head', () => {
    const record = new PrefixRecord({ maxBlocks: 4, ttlMs: 0 });
    record.add([1, 2, 3], 0, null);
    record.add([7, 8], 1, null);
    assert.equal(record.size, 4);
    assert.equal(record.match([1, 2, 3], 2), 2);
  });
});

describe('request traits', () => {
  const opts = { blockChars: BLOCK, sessionHeader: 'x-session-id' };
  /** A body as request-context-from.ts hands it on: parsed JSON. */
  const chat = (body: object) => JSON.parse(JSON.stringify(body));

  test('a chat prefix covers tools, roles and messages in order', () => {
    const base = {
      messages: [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: 'hello there, how are you?' },
      ],
    };
    const a = promptTraits('/v1/chat/completions', {}, chat(base), opts)?.prefix ?? [];
    const sameText = promptTraits('/v1/chat/completions', {}, chat({ ...base, temperature: 0.1 }), opts)?.prefix;
    assert.ok(a.length > 10);
    assert.deepEqual(sameText, a, 'sampling parameters are not part of the prefix');
    const withTools = promptTraits('/v1/chat/completions', {}, chat({ ...base, tools: [{ type: 'function' }] }), opts);
    assert.notEqual(withTools?.prefix?.[0], a[0], 'tool definitions render first');
    const otherRole = chat({ messages: [{ role: 'user', content: SYSTEM }] });
    assert.notEqual(promptTraits('/v1/chat/completions', {}, otherRole, opts)?.prefix?.[0], a[0]);
  });

  test('completions and /generate use their prompt; a session header is read; no prompt, no traits', () => {
    const prompt = 'Once upon a time, in a land far away, '.repeat(3);
    const completion = promptTraits('/v1/completions', {}, chat({ prompt }), opts)?.prefix;
    const generate = promptTraits('/generate', { 'x-session-id': 's1' }, chat({ text: prompt }), opts);
    assert.deepEqual(completion, blockHashes(prompt, BLOCK));
    assert.deepEqual(generate?.prefix, completion);
    assert.equal(generate?.session, 's1');
    assert.equal(promptTraits('/v1/models', {}, undefined, opts), undefined);
    assert.equal(promptTraits('/v1/completions', {}, 'not an object', opts), undefined);
  });
});
