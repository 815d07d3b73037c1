import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatDuration, formatSize, parseDuration, parseSize } from '../../src/config/duration.js';

test('parseDuration reads a number with a unit, in milliseconds', () => {
  const cases: Array<[string, number]> = [
    ['250ms', 250],
    ['10s', 10_000],
    ['1.5s', 1_500],
    ['10m', 600_000],
    ['1h', 3_600_000],
    ['1h30m', 5_400_000],
    ['1m30s', 90_000],
    ['0.5ms', 0.5],
    ['1.1s', 1_100],
    ['0s', 0],
  ];
  for (const [text, ms] of cases) assert.equal(parseDuration(text), ms, text);
});

test('parseDuration accepts 0 as a number or string, refuses other bare numbers and junk', () => {
  assert.equal(parseDuration(0), 0);
  assert.equal(parseDuration('0'), 0);
  for (const bad of [5, '5', '', 'fast', '10 s', '-1s', '1d', 's', '10sec', '1.s', null, true, ['1s']]) {
    assert.equal(parseDuration(bad), null, JSON.stringify(bad));
  }
});

test('parseSize reads binary and decimal units and plain byte counts', () => {
  const cases: Array<[unknown, number]> = [
    ['32MiB', 32 * 1024 * 1024],
    ['512KiB', 512 * 1024],
    ['1GiB', 1024 ** 3],
    ['100KB', 100_000],
    ['1MB', 1_000_000],
    ['1024', 1024],
    [1024, 1024],
    ['64kib', 64 * 1024],
    ['1.5KiB', 1536],
    ['10B', 10],
  ];
  for (const [value, bytes] of cases) assert.equal(parseSize(value), bytes, String(value));
});

test('parseSize refuses unknown units, fractions of a byte and negatives', () => {
  for (const bad of ['32M', '1.5', '-1', -1, 1.5, 'big', '', '1 0KB', null]) {
    assert.equal(parseSize(bad), null, JSON.stringify(bad));
  }
});

test('formatDuration picks the largest exact unit and round-trips', () => {
  const cases: Array<[number, string]> = [
    [0, '0s'],
    [250, '250ms'],
    [1_500, '1.5s'],
    [10_000, '10s'],
    [90_000, '90s'],
    [600_000, '10m'],
    [3_600_000, '1h'],
  ];
  for (const [ms, text] of cases) {
    assert.equal(formatDuration(ms), text);
    assert.equal(parseDuration(text), ms);
  }
});

test('formatSize picks the largest exact unit and round-trips', () => {
  for (const [bytes, text] of [
    [32 * 2 ** 20, '32MiB'],
    [64 * 2 ** 10, '64KiB'],
    [100_000, '100KB'],
    [1_000, '1KB'],
    [1_001, '1001B'],
  ] as const) {
    assert.equal(formatSize(bytes), text);
    assert.equal(parseSize(text), bytes);
  }
});
