/**
 * N replicas meeting one burst of new prompts between two load reports (routing.replicas): each sees
 * only its own dispatches, so the idle-slot exception of the bound (rendezvous.ts) would let every
 * replica fill the same backend's idle slots by the hash alone. Counting its own dispatches N times
 * keeps the fleet's total per backend within 1.3x the mean, while a conversation's later turn (not an
 * opening) still takes its home's idle slot on what this replica alone has sent.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ReportedLoad } from '../../src/fleet/registry.js';
import { backendLoad, hasIdleSlot } from '../../src/routing/load/backend-load.js';
import { boundedPick } from '../../src/routing/policies/rendezvous.js';
import { hashText } from '../../src/routing/text-hash.js';

const NAMES = ['gpu0', 'gpu1', 'gpu2', 'gpu3'];
/** The last report before the burst: every backend idle, with `slots` batch slots each. */
const idle = (slots: number): ReportedLoad => ({
  running: 0,
  queued: 0,
  tokenUsage: 0,
  maxRunning: slots,
  inflightAtScrape: 0,
});
/** 16 new prompts per replica against 8 slots per backend: the fleet's 32 slots cannot take 2 or more replicas' at once. */
const IDLE = idle(8);

/** `count` replicas each send `perReplica` unique prompts in turn, with no report between; fleet totals per backend. */
function burst(count: number, perReplica: number, replicas: number, opening = true): number[] {
  const sent = Array.from({ length: count }, () => NAMES.map(() => 0));
  for (let i = 0; i < count * perReplica; i++) {
    const own = sent[i % count];
    const members = NAMES.map((name, b) => {
      const facts = { inflight: own[b], reported: IDLE };
      return {
        name,
        load: backendLoad(facts, replicas),
        idleSlot: hasIdleSlot(facts),
        idleSlotFleetWide: hasIdleSlot(facts, replicas),
      };
    });
    const key = hashText(`Unique prompt ${i}: a fact about rivers.`);
    own[NAMES.indexOf(boundedPick(key, members, members, 1.25, opening).picked.name)]++;
  }
  return NAMES.map((_, b) => sent.reduce((sum, own) => sum + own[b], 0));
}

const worst = (totals: number[]) => Math.max(...totals) / (totals.reduce((a, b) => a + b, 0) / totals.length);

for (const count of [2, 3, 4]) {
  test(`${count} replicas, 16 new prompts each at once: no backend over 1.3x the mean with routing.replicas: ${count}`, () => {
    const totals = burst(count, 16, count);
    assert.ok(worst(totals) <= 1.3, `per backend ${totals.join('/')}`);
  });
}

test('counting own dispatches once, the same burst piles onto the hash homes', () => {
  const totals = burst(3, 16, 1);
  assert.ok(worst(totals) > 1.3, `per backend ${totals.join('/')}: the case the scaling exists for`);
});

test("a later turn keeps its home's idle slot on this replica's own count (a stale guess must not move it)", () => {
  const key = hashText('a conversation');
  const facts = (inflight: number) => ({ inflight, reported: idle(4) });
  // Two of this replica's requests on the home since the report: 2 of 4 slots, or 6 counted 3 times.
  const members = NAMES.map((name) => {
    const own = facts(0);
    return { name, load: backendLoad(own, 3), idleSlot: hasIdleSlot(own), idleSlotFleetWide: hasIdleSlot(own, 3) };
  });
  const home = boundedPick(key, members, members, 1.25).picked.name;
  const busyHome = members.map((m) => {
    if (m.name !== home) return m;
    return {
      name: m.name,
      load: backendLoad(facts(2), 3),
      idleSlot: true,
      idleSlotFleetWide: hasIdleSlot(facts(2), 3),
    };
  });
  assert.equal(boundedPick(key, busyHome, busyHome, 1.25, false).picked.name, home, 'a later turn stays');
  assert.notEqual(boundedPick(key, busyHome, busyHome, 1.25, true).picked.name, home, 'an opening spreads');
});
