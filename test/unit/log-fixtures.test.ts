/**
 * The log parsers over real log excerpts quoted in public SGLang and vLLM issues
 * (test/fixtures/logs/index.json gives each one's source and expected verdict): the verdict at the
 * end of the file, and for crashes, that the failure is reported on its head line, not later.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LineSplitter } from '../../src/fleet/logs/line-splitter.js';
import type { LogEvent } from '../../src/fleet/logs/log-events.js';
import { createLogParser } from '../../src/fleet/logs/log-parser.js';
import { assertVerdict, fixtureText, loadLogFixtures, verdictOf } from '../helpers/log-fixtures.js';

const fixtures = loadLogFixtures();

/** The file's lines as the watcher hands them out, each with the parser's events for it. */
function parse(engine: 'sglang' | 'vllm', text: string): Array<{ line: string; events: LogEvent[] }> {
  const parser = createLogParser(engine, []);
  return new LineSplitter().push(text).map((line) => ({ line, events: parser.push(line) }));
}

describe('log fixtures from public issues', () => {
  test('at least 20, from both engines, fatal and not', () => {
    assert.ok(fixtures.length >= 20, `${fixtures.length} fixtures`);
    for (const engine of ['sglang', 'vllm'])
      assert.ok(
        fixtures.some((f) => f.engine === engine),
        engine,
      );
    assert.ok(fixtures.some((f) => f.verdict.state === 'failed'));
    assert.ok(fixtures.some((f) => f.verdict.state !== 'failed'));
  });

  for (const fixture of fixtures) {
    test(`${fixture.file}: ${fixture.verdict.state}`, () => {
      const parsed = parse(fixture.engine, fixtureText(fixture));
      assertVerdict(verdictOf(parsed.flatMap((entry) => entry.events)), fixture.verdict);
    });
  }

  for (const fixture of fixtures.filter((f) => f.verdict.suspect_line !== undefined)) {
    test(`${fixture.file}: the failure's reason comes from its suspect line`, () => {
      const lines = fixtureText(fixture).split('\n');
      const expected = lines[(fixture.verdict.suspect_line ?? 0) - 1];
      const parsed = parse(fixture.engine, fixtureText(fixture));
      const last = parsed.filter((entry) => entry.events.some((event) => event.type === 'suspect')).at(-1);
      assert.equal(last?.line, expected);
      assert.ok(!parsed.some((entry) => entry.events.some((event) => event.type === 'fatal')), 'no fatal line');
    });
  }

  for (const fixture of fixtures.filter((f) => f.verdict.head_line !== undefined)) {
    test(`${fixture.file}: fatal on its head line`, () => {
      // Empty lines are dropped by the splitter; count the file's lines to find the head.
      const lines = fixtureText(fixture).split('\n');
      const head = lines[(fixture.verdict.head_line ?? 0) - 1];
      const parsed = parse(fixture.engine, fixtureText(fixture));
      const firstFatal = parsed.find((entry) => entry.events.some((event) => event.type === 'fatal'));
      assert.equal(firstFatal?.line, head);
    });
  }
});
