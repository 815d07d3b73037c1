/** `-h` on every verb exits 0 with the verb's usage on stdout, as `--help` does (cli-usage.test.ts). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { usageOfEveryVerb, VERBS } from '../helpers/cli.js';

test('every verb answers -h with its usage on stdout and exit 0', async () => {
  const usages = await usageOfEveryVerb('-h');
  assert.deepEqual([...usages.keys()].sort(), [...VERBS].sort());
});
