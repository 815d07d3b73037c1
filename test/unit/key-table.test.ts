import assert from 'node:assert/strict';
import { test } from 'node:test';
import { KeyTable } from '../../src/fleet/kv-events/key-table.js';

test('the key table answers as a Map does through 400,000 sets, deletes and gets, keys colliding in their low bits included', () => {
  let seed = 7;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  // Block keys as chainKey makes them (positive, below 2^53), and 200 that share their low 32 bits (one probe run).
  const keys = Array.from(
    { length: 5000 },
    () => Math.floor(random() * 2 ** 31) * 2 ** 21 + 1 + Math.floor(random() * 2 ** 20),
  );
  for (let i = 1; i <= 200; i++) keys.push(i * 2 ** 32 + 12_345);
  const table = new KeyTable<number>();
  const map = new Map<number, number>();
  for (let op = 0; op < 400_000; op++) {
    const key = keys[Math.floor(random() * keys.length)];
    const r = random();
    if (r < 0.5) {
      table.set(key, op);
      map.set(key, op);
    } else if (r < 0.8) assert.equal(table.delete(key), map.delete(key), `op ${op}: delete`);
    else assert.equal(table.get(key), map.get(key), `op ${op}: get`);
    assert.equal(table.size, map.size);
  }
  for (const key of keys) assert.equal(table.get(key), map.get(key));
  assert.throws(() => table.set(0, 1), /never 0/);
});
