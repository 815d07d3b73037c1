/**
 * The Markdown linter that `npm run lint` runs (markdownlint-cli2, configured by
 * .markdownlint-cli2.jsonc with the custom rule scripts/markdownlint/unclosed-fence.mjs) passes
 * README.md, docs/ and src/README.md, and fails on what renders broken: a fence never closed, a
 * table row with a cell too many, a link to a heading that is not there.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { test } from 'node:test';
import { main } from 'markdownlint-cli2';

const root = resolve(import.meta.dirname, '../..');

/** Lints the repository's globs (`globs`) or only the given texts, with the repository's config. */
async function lint(texts?: Record<string, string>): Promise<{ code: number; errors: string[] }> {
  const errors: string[] = [];
  const code = await main({
    directory: root,
    argv: [],
    noGlobs: texts !== undefined,
    nonFileContents: texts,
    logMessage: () => {},
    logError: (message) => errors.push(message),
  });
  return { code, errors };
}

const fenced = ['# Title', '', 'Run:', '', '```sh', 'fleetgate serve', '```', '', '## After', '', 'Prose.', ''];

test('README.md, CHANGELOG.md, CONTRIBUTING.md, docs/ and src/README.md pass the Markdown linter', async () => {
  const { code, errors } = await lint();
  assert.deepEqual(errors, []);
  assert.equal(code, 0);
});

test('a closed fence passes and the same text with the fence left open fails', async () => {
  assert.deepEqual(await lint({ 'closed.md': fenced.join('\n') }), { code: 0, errors: [] });
  const open = fenced.filter((_, i) => i !== 6).join('\n');
  const { code, errors } = await lint({ 'open.md': open });
  assert.equal(code, 1);
  assert.equal(errors.length, 1);
  assert.match(errors[0], /open\.md:5 error FG001\/unclosed-code-fence/);
});

test('README.md with its "Launch the fleet" fence left open, as it was, fails', async () => {
  const lines = readFileSync(resolve(root, 'README.md'), 'utf8').split('\n');
  const opening = lines.indexOf('```yaml', lines.indexOf('## Launch the fleet'));
  const closing = lines.indexOf('```', opening + 1);
  assert.ok(opening > 0 && closing > opening, 'README has the launch example');
  lines.splice(closing, 1);
  const { code, errors } = await lint({ 'README-open.md': lines.join('\n') });
  assert.equal(code, 1);
  assert.ok(
    errors.some((e) => e.includes(`README-open.md:${opening + 1} error FG001/unclosed-code-fence`)),
    errors.join('\n'),
  );
});

test('a table row with a cell too many and a link to a missing heading fail', async () => {
  const table = ['# T', '', '| a | b |', '| --- | --- |', '| 1 | 2 | 3 |', ''].join('\n');
  assert.match((await lint({ 'table.md': table })).errors.join('\n'), /MD056\/table-column-count/);
  const link = ['# T', '', 'See [there](#nowhere).', '', '## Somewhere', '', 'Text.', ''].join('\n');
  assert.match((await lint({ 'link.md': link })).errors.join('\n'), /MD051\/link-fragments/);
});
