/**
 * Every relative link in the repository's Markdown (README.md, docs/, bench/, any other) resolves to
 * a file or folder inside the repository: whoever clones it has nothing beside it. In README.md and
 * docs/*.md, whose links a newcomer follows, a `#anchor` must also name a heading of the target
 * Markdown file (GitHub's heading ids), so a renamed heading cannot leave a link pointing nowhere.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { test } from 'node:test';

const root = resolve(import.meta.dirname, '../..');
const SKIPPED_DIRS = new Set(['node_modules', 'dist', '.git', '.venv']);

function markdownFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (entry.isDirectory()) return SKIPPED_DIRS.has(entry.name) ? [] : markdownFiles(join(dir, entry.name));
    return entry.name.endsWith('.md') ? [join(dir, entry.name)] : [];
  });
}

/** Link targets of `[text](target "title")`, `![alt](target)` and `[label]: target`, outside code. */
function linkTargets(markdown: string): string[] {
  const prose = markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '').replace(/`[^`\n]*`/g, '');
  const inline = [...prose.matchAll(/\]\(\s*(<[^>]*>|[^)\s]+)/g)].map((m) => m[1]);
  const references = [...prose.matchAll(/^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)/gm)].map((m) => m[1]);
  return [...inline, ...references].map((target) => target.replace(/^<|>$/g, ''));
}

/** A link to another site, or to a place in the same file. */
function isExternal(target: string): boolean {
  return /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('#') || target.startsWith('//');
}

/** GitHub's id for a heading: its text lower-cased, punctuation dropped, spaces as `-`, repeats numbered. */
function headingIds(markdown: string): Set<string> {
  const prose = markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
  const ids = new Set<string>();
  const seen = new Map<string, number>();
  for (const [, heading] of prose.matchAll(/^#{1,6}[ \t]+(.+?)[ \t#]*$/gm)) {
    const text = heading.replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/<[^>]+>/g, '');
    const base = text
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    ids.add(count === 0 ? base : `${base}-${count}`);
  }
  return ids;
}

/** README.md and docs/*.md: the documents whose anchors are checked too. */
function checksAnchors(file: string): boolean {
  const path = relative(root, file);
  return path === 'README.md' || (dirname(path) === 'docs' && path.endsWith('.md'));
}

test('linkTargets finds inline, image and reference links, and skips code', () => {
  const text = [
    'See [a](docs/a.md#part "title") and ![b](img/b.png).',
    '`[not](code.md)`',
    '```',
    '[nor](fenced.md)',
    '```',
    '[c]: <c dir/c.md>',
  ].join('\n');
  assert.deepEqual(linkTargets(text), ['docs/a.md#part', 'img/b.png', 'c dir/c.md']);
});

test("headingIds gives GitHub's ids: punctuation and code marks dropped, links to their text, repeats numbered", () => {
  const text = [
    '# Two commands',
    '## The serving view (`/fleet`, `fleetgate status`)',
    '### [Launch](x.md) it',
    '## Two commands',
  ];
  assert.deepEqual(
    [...headingIds(text.join('\n'))],
    ['two-commands', 'the-serving-view-fleet-fleetgate-status', 'launch-it', 'two-commands-1'],
  );
});

test('every #anchor in README.md and docs/*.md names a heading of its target', () => {
  const files = markdownFiles(root).filter(checksAnchors);
  const broken: string[] = [];
  let checked = 0;
  for (const file of files) {
    for (const target of linkTargets(readFileSync(file, 'utf8'))) {
      const hash = target.indexOf('#');
      if (hash < 0 || /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) continue;
      const path = decodeURIComponent(target.slice(0, hash));
      const targetFile = path === '' ? file : resolve(dirname(file), path);
      if (!targetFile.endsWith('.md') || !existsSync(targetFile)) continue;
      checked++;
      const anchor = decodeURIComponent(target.slice(hash + 1)).toLowerCase();
      if (!headingIds(readFileSync(targetFile, 'utf8')).has(anchor)) broken.push(`${relative(root, file)}: ${target}`);
    }
  }
  assert.ok(checked > 0, 'found anchors to check');
  assert.deepEqual(broken, [], 'anchors that name no heading of their target');
});

test('every relative link in the Markdown files resolves to a path inside the repository', () => {
  const files = markdownFiles(root);
  assert.ok(files.includes(join(root, 'README.md')) && files.some((f) => f.startsWith(join(root, 'docs'))));
  const broken: string[] = [];
  let checked = 0;
  for (const file of files) {
    for (const target of linkTargets(readFileSync(file, 'utf8'))) {
      if (isExternal(target)) continue;
      checked++;
      const path = decodeURIComponent(target.split(/[#?]/)[0]);
      const absolute = path.startsWith('/') ? join(root, path) : resolve(dirname(file), path);
      const inside = absolute === root || absolute.startsWith(root + sep);
      if (!inside || !existsSync(absolute)) broken.push(`${relative(root, file)}: ${target}`);
    }
  }
  assert.ok(checked > 0, 'found relative links to check');
  assert.deepEqual(broken, [], 'links that do not resolve inside the repository');
});
