/**
 * The KV-event decoder and map, from bytes as the engines send them (test/fixtures/kv-events: SGLang's
 * positional arrays, vLLM's tagged maps after PR 42892 and its arrays before), and the map's bound.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { encode } from '@msgpack/msgpack';
import { blockKeys } from '../../src/fleet/kv-events/block-keys.js';
import { KvBlockMap } from '../../src/fleet/kv-events/kv-block-map.js';
import { decodeBatch, type KvEvent, readFrames } from '../../src/fleet/kv-events/kv-decode.js';

const CAPTURED = [151644, 872, 198, 9064, 374, 279, 6722, 315, 5616, 30, 151645, 198, 151644, 77091, 198, 151667];
const SECOND = Array.from({ length: 16 }, (_, i) => 1000 + i);

function fixture(name: string): Uint8Array[] {
  const { frames_hex } = JSON.parse(readFileSync(`test/fixtures/kv-events/${name}.json`, 'utf8')) as {
    frames_hex: string[];
  };
  return frames_hex.map((hex) => new Uint8Array(Buffer.from(hex, 'hex')));
}

describe('KV-event frames, decoded from the bytes each engine sends', () => {
  test('SGLang: positional arrays, one BlockStored per page, signed int64 hashes', () => {
    const frame = readFrames(fixture('sglang-array'));
    assert.equal(frame.topic, 'kv-events');
    assert.equal(frame.seq, 7);
    const batch = decodeBatch(frame.payload);
    assert.equal(batch.ts, 1789095808.5);
    assert.equal(batch.dpRank, null);
    assert.deepEqual(
      batch.events.map((e) => e.type),
      ['stored', 'stored', 'removed', 'cleared'],
    );
    const [first, second] = batch.events as Extract<KvEvent, { type: 'stored' }>[];
    assert.deepEqual(first.tokens, CAPTURED);
    assert.equal(first.parent, null);
    assert.equal(first.blockSize, 16);
    assert.equal(first.unkeyable, null);
    assert.deepEqual(first.hashes, ['-6686225421157720064']);
    assert.equal(second.parent, '-6686225421157720064');
  });

  test('vLLM after PR 42892: maps tagged by type at both levels; uint64 above 2^63 and byte hashes kept exact', () => {
    const frame = readFrames(fixture('vllm-map'));
    assert.equal(frame.seq, 42);
    const batch = decodeBatch(frame.payload);
    assert.equal(batch.dpRank, 0);
    const [first, second, removed] = batch.events;
    assert.equal(first.type, 'stored');
    assert.equal(second.type, 'stored');
    assert.equal(removed.type, 'removed');
    if (first.type !== 'stored' || second.type !== 'stored' || removed.type !== 'removed') return;
    assert.deepEqual(first.hashes, ['15760518052499183552']);
    assert.deepEqual(first.tokens, CAPTURED);
    assert.equal(first.unkeyable, null, 'extra_keys [None], group 0, full attention: keyable');
    assert.equal(second.parent, '15760518052499183552');
    assert.match(String(second.hashes[0]), /^x000102/);
    assert.deepEqual(removed.hashes, second.hashes);
    assert.equal(batch.events[3].type, 'cleared');
  });

  test('vLLM before PR 42892: positional arrays, several blocks in one BlockStored', () => {
    const batch = decodeBatch(readFrames(fixture('vllm-array')).payload);
    const stored = batch.events[0];
    assert.equal(stored.type, 'stored');
    if (stored.type !== 'stored') return;
    assert.equal(stored.hashes.length, 2);
    assert.equal(stored.tokens.length, 32);
    const map = new KvBlockMap(100);
    map.apply('b', [stored]);
    assert.equal(map.size, 2);
    const keys = blockKeys([...CAPTURED, ...SECOND], 16);
    assert.equal(map.leadingRuns(keys).get('b'), 2);
  });

  test('the same tokens give the same keys whatever the engine and its hashes', () => {
    const sglang = new KvBlockMap(100);
    const vllm = new KvBlockMap(100);
    const s = decodeBatch(readFrames(fixture('sglang-array')).payload).events.slice(0, 2);
    const v = decodeBatch(readFrames(fixture('vllm-map')).payload).events.slice(0, 2);
    sglang.apply('a', s);
    vllm.apply('a', v);
    const keys = blockKeys([...CAPTURED, ...SECOND, ...SECOND], 16);
    assert.equal(sglang.leadingRuns(keys).get('a'), 2);
    assert.equal(vllm.leadingRuns(keys).get('a'), 2);
  });

  test('an unknown event type is skipped and counted; LoRA and other tiers are not recorded', () => {
    const payload = encode([
      1,
      [
        ['BlockStored', [1], null, SECOND, 16, 7, 'GPU'],
        ['BlockStored', [2], null, SECOND, 16, null, 'CPU'],
        { type: 'SomethingNew', x: 1 },
        ['BlockStored', [3], null, SECOND, 16, null, null],
      ],
    ]);
    const batch = decodeBatch(payload);
    assert.equal(batch.unknown, 1);
    const map = new KvBlockMap(100);
    const applied = map.apply('b', batch.events);
    assert.deepEqual(applied, { stored: 1, removed: 0, skipped: 2 });
  });

  test('malformed frames are refused', () => {
    assert.throws(() => readFrames([new Uint8Array(1)]), /3 frames/);
    assert.throws(() => decodeBatch(new Uint8Array([0xc1])), /msgpack/);
  });
});

describe('the block map', () => {
  const stored = (hash: number, parent: number | null, tokens: number[]): KvEvent => ({
    type: 'stored',
    hashes: [hash],
    parent,
    tokens,
    blockSize: tokens.length,
    unkeyable: null,
  });
  const page = (n: number) => Array.from({ length: 4 }, (_, i) => n * 10 + i);

  test('leading runs per holder; a removal cuts the run; AllBlocksCleared empties one holder only', () => {
    const map = new KvBlockMap(1000);
    map.apply('a', [stored(1, null, page(1)), stored(2, 1, page(2)), stored(3, 2, page(3))]);
    map.apply('b', [stored(9, null, page(1))]);
    const keys = blockKeys([...page(1), ...page(2), ...page(3), ...page(4)], 4);
    assert.deepEqual(Object.fromEntries(map.leadingRuns(keys)), { a: 3, b: 1 });
    map.apply('a', [{ type: 'removed', hashes: [2], unkeyable: null }]);
    assert.equal(map.leadingRuns(keys).get('a'), 1);
    map.apply('a', [{ type: 'cleared' }]);
    assert.equal(map.leadingRuns(keys).get('a'), undefined);
    assert.equal(map.heldBy('a'), 0);
    assert.equal(map.leadingRuns(keys).get('b'), 1);
    assert.equal(map.size, 1);
  });

  test('a block whose parent the map does not hold is not recorded', () => {
    const map = new KvBlockMap(1000);
    assert.deepEqual(map.apply('a', [stored(2, 1, page(2))]), { stored: 0, removed: 0, skipped: 1 });
    // Nor one whose parent was the block stored last but is gone since (removed, or its holder cleared).
    map.apply('a', [
      stored(1, null, page(1)),
      stored(2, 1, page(2)),
      { type: 'removed', hashes: [2], unkeyable: null },
    ]);
    assert.deepEqual(map.apply('a', [stored(3, 2, page(3))]), { stored: 0, removed: 0, skipped: 1 });
    map.apply('b', [stored(1, null, page(1))]);
    map.clear('b');
    assert.deepEqual(map.apply('b', [stored(2, 1, page(2))]), { stored: 0, removed: 0, skipped: 1 });
    assert.deepEqual(map.apply('a', [stored(2, 1, page(2))]), { stored: 1, removed: 0, skipped: 0 }, 'held: recorded');
  });

  test('memory held at max_blocks under 1M stored blocks; the least recently stored go first', () => {
    const max = 50_000;
    const map = new KvBlockMap(max);
    const started = performance.now();
    const tokens = [0, 0, 0, 0];
    for (let batch = 0; batch < 10_000; batch++) {
      const events: KvEvent[] = [];
      // 100 conversations of 100 pages per batch, chained; 1M stored blocks in all, over 7 holders.
      for (let i = 0; i < 100; i++) {
        const n = batch * 100 + i;
        tokens[0] = n;
        events.push(stored(n + 1, i === 0 ? null : n, [...tokens]));
      }
      map.apply(`gpu${batch % 7}`, events);
      assert.ok(map.size <= max);
    }
    assert.equal(map.size, max);
    const ms = performance.now() - started;
    assert.ok(ms < 20_000, `1M blocks applied in ${ms.toFixed(0)} ms`);
    // The newest batch is held whole; the oldest is gone.
    const newest = Array.from({ length: 100 }, (_, i) => [9_999 * 100 + i, 0, 0, 0]).flat();
    assert.equal(map.leadingRuns(blockKeys(newest, 4)).get(`gpu${9_999 % 7}`), 100);
    const oldest = Array.from({ length: 100 }, (_, i) => [i, 0, 0, 0]).flat();
    assert.equal(map.leadingRuns(blockKeys(oldest, 4)).size, 0);
  });
});
