/**
 * Rendezvous hashing with bounded loads (routing/policies/rendezvous.ts) and the prefix key it hashes: the
 * same home on every replica, membership changes that move only the changed backend's keys, the
 * load bound, and prefix-aware policies of two "replicas" with different histories agreeing.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LeastLoaded } from '../../src/routing/policies/basic-policies.js';
import type { Candidate } from '../../src/routing/policies/policy-contract.js';
import { PrefixAware } from '../../src/routing/policies/prefix-aware.js';
import { boundedPick, loadBound, score } from '../../src/routing/policies/rendezvous.js';
import { promptTraits } from '../../src/routing/request-traits.js';
import { hashText } from '../../src/routing/text-hash.js';

const KEYS = Array.from({ length: 4000 }, (_, i) => hashText(`conversation-${i}`));
const fleet = (names: string[], load = 0): Candidate[] => names.map((name) => ({ name, load }));
const NAMES = ['gpu0', 'gpu1', 'gpu2', 'gpu3'];
const homeOf = (key: number, members: Candidate[]) => boundedPick(key, members, members, 1.25).picked.name;

/**
 * `members` in `key`'s preference order (highest score first; ties, which need equal names, by name):
 * the order boundedPick walks in one pass without sorting, written out as the reference it must follow.
 */
function preferenceOrder<M extends Candidate>(key: number, members: readonly M[]): M[] {
  return members
    .map((member) => ({ member, s: score(key, member.name) }))
    .sort((a, b) => b.s - a.s || (a.member.name < b.member.name ? -1 : 1))
    .map((entry) => entry.member);
}

describe('rendezvous hashing', () => {
  test('a key has the same home whatever order a replica lists the backends in', () => {
    const a = fleet(NAMES);
    const b = [...a].reverse();
    for (const key of KEYS) assert.equal(homeOf(key, a), homeOf(key, b));
  });

  test('homes spread evenly: each backend is home to its share of keys within 10 %', () => {
    const counts = new Map<string, number>();
    for (const key of KEYS) counts.set(homeOf(key, fleet(NAMES)), (counts.get(homeOf(key, fleet(NAMES))) ?? 0) + 1);
    const mean = KEYS.length / NAMES.length;
    for (const name of NAMES)
      assert.ok(Math.abs((counts.get(name) ?? 0) - mean) < 0.1 * mean, `${name}: ${counts.get(name)}`);
  });

  test('a backend leaving moves only the keys it was home to, and coming back takes exactly those back', () => {
    const all = fleet(NAMES);
    const without = fleet(NAMES.filter((n) => n !== 'gpu2'));
    let moved = 0;
    for (const key of KEYS) {
      const before = homeOf(key, all);
      const after = homeOf(key, without);
      if (before === 'gpu2') moved++;
      else assert.equal(after, before, 'a key whose home stayed does not move');
      // Its new home is the next in its own order.
      if (before === 'gpu2') assert.equal(after, preferenceOrder(key, all)[1].name);
    }
    assert.ok(moved > 0.15 * KEYS.length && moved < 0.35 * KEYS.length, `moved ${moved}`);
    const five = fleet([...NAMES, 'gpu4']);
    for (const key of KEYS) {
      const after = homeOf(key, five);
      if (after !== 'gpu4') assert.equal(after, homeOf(key, all), 'only keys the new backend wins move');
    }
  });

  test('the bound: a home at or over ceil(factor x (total + 1) / n) passes the key to the next in its order', () => {
    const members = fleet(NAMES);
    const key = KEYS[0];
    const order = preferenceOrder(key, members).map((m) => m.name);
    // Loads 0 everywhere but the home's: bound = ceil(1.25 * (L + 1) / 4).
    const loaded = (homeLoad: number) => members.map((m) => ({ ...m, load: m.name === order[0] ? homeLoad : 0 }));
    assert.equal(loadBound(loaded(2), 1.25), 1);
    assert.equal(boundedPick(key, loaded(0), loaded(0), 1.25).picked.name, order[0]);
    const over = boundedPick(key, loaded(2), loaded(2), 1.25);
    assert.deepEqual([over.picked.name, over.home], [order[1], false]);
    // The bound averages over the whole pool: a busy pool lets the home take more.
    const busy = members.map((m) => ({ ...m, load: m.name === order[0] ? 10 : 9 }));
    assert.equal(boundedPick(key, busy, busy, 1.25).picked.name, order[0]);
    // Only some are free (others at their cap): the first free one in the key's order under the bound.
    const free = busy.filter((m) => m.name !== order[0]);
    assert.equal(boundedPick(key, free, busy, 1.25).picked.name, order[1]);
  });

  test('a home reporting an idle batch slot is never over the bound (a stale report must not move it)', () => {
    const members = fleet(NAMES);
    const key = KEYS[2];
    const order = preferenceOrder(key, members).map((m) => m.name);
    const withHome = (idleSlot: boolean) => members.map((m) => ({ ...m, load: m.name === order[0] ? 3 : 0, idleSlot }));
    assert.equal(boundedPick(key, withHome(false), withHome(false), 1.25).picked.name, order[1]);
    assert.equal(boundedPick(key, withHome(true), withHome(true), 1.25).picked.name, order[0]);
  });

  test('under a stream of keys no backend exceeds the bound: the most loaded stays within 1.25x the mean', () => {
    const members = fleet(NAMES);
    // Every key is the same (the worst case for affinity): the bound alone spreads them.
    for (let i = 0; i < 400; i++) {
      const { picked } = boundedPick(KEYS[1], members, members, 1.25);
      (picked as { load: number }).load++;
    }
    const loads = members.map((m) => m.load);
    const mean = loads.reduce((a, b) => a + b, 0) / loads.length;
    assert.ok(Math.max(...loads) <= Math.ceil(1.25 * mean), `loads ${loads.join('/')}`);
  });
});

describe('the prefix key', () => {
  const opts = { blockChars: 32, sessionHeader: 'x-session-id' };
  const chat = (messages: { role: string; content: string }[]) =>
    Buffer.from(JSON.stringify({ model: 'm', messages, stream: true }));
  const system = { role: 'system', content: 'You are a travel guide. '.repeat(20) };
  const turns = (c: number) => {
    const messages = [system, { role: 'user', content: `Conversation ${c}: where to go in Lyon?` }];
    const out = [chat(messages)];
    for (let t = 1; t < 4; t++) {
      messages.push({ role: 'assistant', content: `Answer ${t} `.repeat(30) });
      messages.push({ role: 'user', content: `Follow-up ${t}` });
      out.push(chat(messages));
    }
    return out;
  };
  const keyOf = (body: Buffer, headers = {}) =>
    promptTraits('/v1/chat/completions', headers, JSON.parse(body.toString()), opts)?.key;

  test('every turn of a conversation has its first turn key; conversations with one system prompt differ', () => {
    const a = turns(1).map((body) => keyOf(body));
    const b = turns(2).map((body) => keyOf(body));
    assert.equal(new Set(a).size, 1);
    assert.equal(new Set(b).size, 1);
    assert.notEqual(a[0], b[0]);
  });

  test("only a conversation's first turn, without a session key, is an opening", () => {
    const openingOf = (body: Buffer, headers = {}) =>
      promptTraits('/v1/chat/completions', headers, JSON.parse(body.toString()), opts)?.opening;
    assert.deepEqual(
      turns(1).map((body) => openingOf(body)),
      [true, false, false, false],
    );
    assert.equal(openingOf(turns(1)[0], { 'x-session-id': 's1' }), false, 'the client names a session: keep it');
    const completion = (prompt: string) => promptTraits('/v1/completions', {}, { prompt }, opts)?.opening;
    assert.equal(completion('A fact about rivers.'), true);
    assert.equal(completion('x'.repeat(3000)), false, 'past the key span: maybe a transcript, keep it');
  });

  test('a session header is the key when sent', () => {
    const [first] = turns(1);
    const [other] = turns(2);
    assert.equal(keyOf(first, { 'x-session-id': 's1' }), keyOf(other, { 'x-session-id': 's1' }));
    assert.notEqual(keyOf(first, { 'x-session-id': 's1' }), keyOf(first));
  });
});

describe('two replicas of prefix-aware agree', () => {
  test('turns alternating between two policies with separate histories land on one backend', () => {
    const make = () =>
      new PrefixAware(
        { maxBlocks: 1000, ttlMs: 0, minMatch: 0.3, loadGap: 4, loadRatio: 1.5, balanceFactor: 1.25, now: () => 0 },
        new LeastLoaded(),
      );
    const replicas = [make(), make()];
    const members = fleet(NAMES);
    for (let c = 0; c < 20; c++) {
      const seen = new Set<string>();
      for (let t = 0; t < 6; t++) {
        const traits = { prefix: [c, t], blockChars: 32, key: hashText(`conv-${c}`) };
        const replica = replicas[t % 2];
        const picked = replica.pick(members, traits, members);
        replica.onDispatch(picked, traits);
        seen.add(picked.name);
      }
      assert.equal(seen.size, 1, `conversation ${c} stayed on one backend`);
    }
    // With hashing off, each replica's own record and sessions decide: the same trace moves.
    const off = () =>
      new PrefixAware(
        { maxBlocks: 1000, ttlMs: 0, minMatch: 0.3, loadGap: 4, loadRatio: 1.5, balanceFactor: 0, now: () => 0 },
        new LeastLoaded(),
      );
    const loose = [off(), off()];
    let moved = 0;
    for (let c = 0; c < 20; c++) {
      const seen = new Set<string>();
      for (let t = 0; t < 6; t++) {
        const traits = { prefix: [c, t], blockChars: 32, key: hashText(`conv-${c}`) };
        const replica = loose[t % 2];
        const picked = replica.pick(members, traits, members);
        replica.onDispatch(picked, traits);
        seen.add(picked.name);
      }
      if (seen.size > 1) moved++;
    }
    assert.ok(moved > 0, 'without hashing some conversation moves between the replicas');
  });
});
