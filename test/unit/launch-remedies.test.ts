/** Remedies: the first matching one changes the next command line; steps stop at their floor. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { LaunchRemedy } from '../../src/config/types.js';
import { applyRemedies, flagValue } from '../../src/launch/remedies.js';

const OOM: LaunchRemedy = {
  when: 'Not enough memory|CUDA out of memory',
  set: { '--mem-fraction-static': { step: -0.05, min: 0.75, max: null } },
};
const ARGV = ['python', '-m', 'sglang.launch_server', '--port', '30000', '--mem-fraction-static', '0.88'];

test('a matching reason lowers the flag by the step, with no floating-point noise', () => {
  const { argv, applied } = applyRemedies(ARGV, 'RuntimeError: Not enough memory. Please try...', [OOM]);
  assert.equal(flagValue(argv, '--mem-fraction-static'), '0.83');
  assert.equal(applied, '--mem-fraction-static 0.88 -> 0.83');
  assert.deepEqual(argv.slice(0, 5), ARGV.slice(0, 5), 'other arguments untouched');
});

test('steps stop at the floor; at the floor nothing is applied', () => {
  let argv = ARGV;
  const seen: (string | null)[] = [];
  for (let i = 0; i < 4; i++) {
    const result = applyRemedies(argv, 'CUDA out of memory', [OOM]);
    argv = result.argv;
    seen.push(flagValue(argv, '--mem-fraction-static'));
    if (i === 3) assert.equal(result.applied, null);
  }
  assert.deepEqual(seen, ['0.83', '0.78', '0.75', '0.75']);
});

test('no match leaves the command as it was', () => {
  const result = applyRemedies(ARGV, 'exited with code 1', [OOM]);
  assert.deepEqual(result, { argv: ARGV, applied: null });
});

test('the first matching remedy wins; values replace --flag=value forms or are appended', () => {
  const remedies: LaunchRemedy[] = [
    { when: 'NCCL', set: { '--disable-custom-all-reduce': { value: 'true' } } },
    { when: 'NCCL|memory', set: { '--cuda-graph-max-bs': { value: '64' } } },
  ];
  const argv = ['serve', '--cuda-graph-max-bs=160'];
  assert.deepEqual(applyRemedies(argv, 'NCCL error', remedies).argv, [
    'serve',
    '--cuda-graph-max-bs=160',
    '--disable-custom-all-reduce',
    'true',
  ]);
  assert.deepEqual(applyRemedies(argv, 'out of memory', remedies).argv, ['serve', '--cuda-graph-max-bs=64']);
});
