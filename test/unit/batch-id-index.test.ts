/** The input's custom_id index: exact matches only, first line kept on a duplicate, through growth. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { IdIndex } from '../../src/batch/id-index.js';

test('ids map to their lines through many growths; a duplicate returns the first line', () => {
  const index = new IdIndex();
  const COUNT = 50_000;
  for (let i = 0; i < COUNT; i++) assert.equal(index.add(`req-${i}`, i + 1), 0);
  assert.equal(index.size, COUNT);
  for (let i = 0; i < COUNT; i += 997) assert.equal(index.lineOf(`req-${i}`), i + 1);
  assert.equal(index.add('req-123', 99_999), 124, 'the first line of a duplicate');
  assert.equal(index.lineOf('req-123'), 124, 'the first one kept');
  assert.equal(index.size, COUNT);
  assert.equal(index.lineOf('req-50000'), 0);
  assert.equal(index.lineOf('req-1 '), 0, 'bytes compared exactly');
  assert.equal(index.add('ünïcode "id"', 7), 0);
  assert.equal(index.lineOf('ünïcode "id"'), 7);
  index.clear();
  assert.equal(index.size, 0);
  assert.equal(index.lineOf('req-1'), 0);
});
