import assert from 'node:assert/strict';
import { test } from 'node:test';
import { blockKeys } from '../../src/fleet/kv-events/block-keys.js';
import { concat, extend, extendKnown, PrefixMemo, prefixOf } from '../../src/proxy/kv-prefix.js';

const BLOCK = 16;
const ids = (seed: number, n: number) => Uint32Array.from({ length: n }, (_, i) => (seed * 7919 + i * 31) % 150_000);

test("a conversation's history keys: each turn extends the last one's, exactly the whole history's keys; the same history again is the memo's", () => {
  const memo = new PrefixMemo(8);
  const system = ids(1, 700);
  const history: Uint32Array[] = [system, ids(2, 90)];
  for (let turn = 0; turn < 6; turn++) {
    const prefix = memo.of(history, BLOCK);
    const whole = concat(...history);
    assert.deepEqual(prefix.keys, blockKeys(whole, BLOCK), `turn ${turn}: the keys`);
    assert.equal(prefix.length, whole.length);
    assert.deepEqual(Array.from(prefix.tail), [...whole.subarray(prefix.keys.length * BLOCK)], 'the tail');
    assert.equal(memo.of(history, BLOCK), prefix, "the same history again: the memo's own, nothing hashed");
    history.push(ids(10 + turn, 37 + turn * 13), ids(20 + turn, 51 + turn));
  }
  // The same message object at another place (a repeated "Thanks!"): matched by the whole sequence, not the last.
  const thanks = ids(99, 5);
  const a = [system, thanks];
  const b = [system, ids(3, 40), thanks];
  assert.deepEqual(memo.of(a, BLOCK).keys, blockKeys(concat(...a), BLOCK));
  assert.deepEqual(memo.of(b, BLOCK).keys, blockKeys(concat(...b), BLOCK));
  assert.deepEqual(memo.of([...b, ids(4, 60)], BLOCK).keys, blockKeys(concat(...b, ids(4, 60)), BLOCK));
  // Another block size: not the memo's keys.
  assert.deepEqual(memo.of(b, 8).keys, blockKeys(concat(...b), 8));
});

test("a history whose new messages' block keys the engine's events gave: the same keys, nothing hashed, and the memo's at the next turn", () => {
  const lead = prefixOf(ids(1, 700), BLOCK);
  const learned = [ids(2, 61), ids(3, 150)];
  const whole = concat(ids(1, 700), ...learned);
  // The chain's keys from the lead's last full block on, as far as the engine stored (past the messages: its answer).
  const chainKeys = blockKeys(concat(whole, ids(4, 40)), BLOCK).slice(lead.keys.length);
  const known = extendKnown(lead, learned, chainKeys, BLOCK);
  assert.ok(known !== null);
  assert.deepEqual(known, extend(lead, learned, BLOCK), "extend's keys, tail and length");
  assert.deepEqual(known.keys, blockKeys(whole, BLOCK));
  assert.equal(extendKnown(lead, learned, chainKeys.slice(0, 3), BLOCK), null, 'keys short of the messages: none');
  // Short messages: a tail across the lead's tail and both, or across the two.
  for (const short of [
    [ids(5, 2), ids(6, 1)],
    [ids(5, 3), ids(6, 2)],
    [ids(5, 9), ids(6, 9)],
  ]) {
    const keysAfter = blockKeys(concat(ids(1, 700), ...short, ids(4, 40)), BLOCK).slice(lead.keys.length);
    assert.deepEqual(
      extendKnown(lead, short, keysAfter, BLOCK),
      extend(lead, short, BLOCK),
      `${short.map((m) => m.length)}`,
    );
  }
  const memo = new PrefixMemo(8);
  const history = [ids(1, 700), ...learned];
  memo.remember(history, BLOCK, known);
  assert.equal(memo.of([...history], BLOCK), known, "the next turn's history: the remembered prefix as it is");
});
