/**
 * The house rules src/README.md states, held by the compiler's own parse: no function in src/ runs
 * over 100 lines (data tables, listed below, excepted), no file in src/proxy/ over 300, and the
 * composition root's `createGateway` reads as a table of contents (at most 60 lines).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import ts from 'typescript';

/** Functions that are tables of data, not logic: each name is `file:function`. */
const DATA_TABLES = new Set(['src/metrics/definitions.ts:createMetricFamilies']);

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

interface FunctionLength {
  name: string;
  lines: number;
}

function functionLengths(file: string): FunctionLength[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const found: FunctionLength[] = [];
  const lineOf = (pos: number) => source.getLineAndCharacterOfPosition(pos).line;
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
      const named = node.name ?? (node.parent as { name?: ts.Node }).name;
      found.push({
        name: `${file}:${named?.getText(source) ?? '<anonymous>'}`,
        lines: lineOf(node.end) - lineOf(node.getStart(source)) + 1,
      });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const all = sourceFiles('src').flatMap(functionLengths);

test('no function in src/ over 100 lines, data tables excepted', () => {
  const long = all.filter((f) => f.lines > 100 && !DATA_TABLES.has(f.name));
  assert.deepEqual(
    long.map((f) => `${f.name} (${f.lines} lines)`),
    [],
  );
});

test('createGateway, the composition root, is at most 60 lines', () => {
  const root = all.find((f) => f.name === 'src/app.ts:createGateway');
  assert.ok(root !== undefined && root.lines <= 60, `createGateway: ${root?.lines} lines`);
});

test('no file in src/proxy/ over 300 lines', () => {
  const long = sourceFiles('src/proxy')
    .map((file) => ({ file, lines: readFileSync(file, 'utf8').split('\n').length }))
    .filter((f) => f.lines > 300);
  assert.deepEqual(long, []);
});
