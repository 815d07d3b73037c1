/** How appended log text becomes lines: every break ends a line, tqdm redraws included. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LineSplitter } from '../../src/fleet/logs/line-splitter.js';

test('`\\n`, `\\r\\n` and a lone `\\r` each end a line; empty lines are dropped', () => {
  assert.deepEqual(new LineSplitter().push('a\nb\r\nc\rd\n\n\r\n'), ['a', 'b', 'c', 'd']);
});

test('a partial line is held until its end arrives', () => {
  const splitter = new LineSplitter();
  assert.deepEqual(splitter.push('[2025-03-14 06:56:42 TP0] Load weight'), []);
  assert.deepEqual(splitter.push(' begin. avail mem=137.34 GB\nnext'), [
    '[2025-03-14 06:56:42 TP0] Load weight begin. avail mem=137.34 GB',
  ]);
  assert.deepEqual(splitter.push('\n'), ['next']);
});

test('`\\r\\n` split between two reads is one break', () => {
  const splitter = new LineSplitter();
  assert.deepEqual(splitter.push('a\r'), ['a']);
  assert.deepEqual(splitter.push('\nb'), []);
  assert.deepEqual(splitter.push('\n'), ['b']);
});

test('the latest redraw after a `\\r` is complete at once, and not repeated when its line ends', () => {
  const splitter = new LineSplitter();
  assert.deepEqual(splitter.push('log line\n\rbar 1/3'), ['log line', 'bar 1/3']);
  assert.deepEqual(splitter.push('\rbar 2/3'), ['bar 2/3']);
  assert.deepEqual(splitter.push('\rbar 3/3\n'), ['bar 3/3']);
  assert.deepEqual(splitter.push('\n'), []);
});

test('a redraw cut mid-write is returned again, whole, once the rest arrives', () => {
  const splitter = new LineSplitter();
  assert.deepEqual(splitter.push('\rbar 1'), ['bar 1']);
  assert.deepEqual(splitter.push('0/52\n'), ['bar 10/52']);
});

test('an unterminated line is capped; the rest of it is dropped', () => {
  const splitter = new LineSplitter(10);
  assert.deepEqual(splitter.push('x'.repeat(8)), []);
  assert.deepEqual(splitter.push('y'.repeat(30)), ['xxxxxxxxyy']);
  assert.deepEqual(splitter.push('zzz\nok\n'), ['ok']);
});

test('reset forgets a partial line', () => {
  const splitter = new LineSplitter();
  splitter.push('old run, cut');
  splitter.reset();
  assert.deepEqual(splitter.push('new\n'), ['new']);
});
