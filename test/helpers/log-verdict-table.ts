/**
 * fleetgate's log verdicts against the runbook's `grep -E "Not enough memory|RuntimeError|ValueError"`
 * over every real log excerpt in test/fixtures/logs: the grep is the floor fleetgate is held to
 * (test/unit/log-grep-floor.test.ts), and the table in docs/log-verdicts.md is made from it.
 */
import { LineSplitter } from '../../src/fleet/logs/line-splitter.js';
import type { LogEvent } from '../../src/fleet/logs/log-events.js';
import { createLogParser } from '../../src/fleet/logs/log-parser.js';
import { RUNBOOK_GREP } from '../../src/fleet/logs/log-parser-state.js';
import { fixtureText, type LogFixture, loadLogFixtures, type Verdict, verdictOf } from './log-fixtures.js';

export interface FixtureVerdicts {
  fixture: LogFixture;
  /** The server really failed to start (or died): the index's expected verdict, or its `truth`. */
  failed: boolean;
  /** The 1-based raw lines the grep matches, as `grep -n` would print them. */
  grepLines: number[];
  /** A grep line came while the server had not been seen ready (no ready line, no serving lines yet). */
  grepBeforeReady: boolean;
  fleetgate: Verdict;
}

/** The parser's events per line, as the log follower feeds it (`\r` redraws split, blank lines dropped). */
function eventsByLine(fixture: LogFixture): Array<{ line: string; events: LogEvent[] }> {
  const parser = createLogParser(fixture.engine, []);
  return new LineSplitter().push(fixtureText(fixture)).map((line) => ({ line, events: parser.push(line) }));
}

function isReadyEvent(event: LogEvent): boolean {
  return event.type === 'ready' || (event.type === 'phase' && event.phase === 'serving');
}

export function fixtureVerdicts(): FixtureVerdicts[] {
  return loadLogFixtures().map((fixture) => {
    const raw = fixtureText(fixture).split('\n');
    const grepLines = raw.flatMap((line, i) => (RUNBOOK_GREP.test(line) ? [i + 1] : []));
    const parsed = eventsByLine(fixture);
    let ready = false;
    let grepBeforeReady = false;
    for (const { line, events } of parsed) {
      // A line that shows serving (vLLM's request layer) is read as serving, grep match or not.
      if (events.some(isReadyEvent)) ready = true;
      if (!ready && RUNBOOK_GREP.test(line)) grepBeforeReady = true;
    }
    return {
      fixture,
      failed: fixture.truth === 'failed' || fixture.verdict.state === 'failed',
      grepLines,
      grepBeforeReady,
      fleetgate: verdictOf(parsed.flatMap((entry) => entry.events)),
    };
  });
}

function verdictWord(verdict: Verdict): string {
  if (verdict.state === 'failed') return 'failed';
  if (verdict.state === 'ready-line-seen' || verdict.phase === 'serving') return 'ready';
  return verdict.phase === null ? 'starting' : `starting (${verdict.phase})`;
}

/** Whether the grep and fleetgate each called the log right (failed or not, as it really was). */
function rightness(row: FixtureVerdicts): { grepOk: boolean; fleetgateOk: boolean } {
  return {
    grepOk: row.grepLines.length > 0 === row.failed,
    fleetgateOk: (row.fleetgate.state === 'failed') === row.failed,
  };
}

/** The Markdown table: each fixture, what happened, what the grep and fleetgate say, who is right. */
export function verdictTable(rows: readonly FixtureVerdicts[] = fixtureVerdicts()): string {
  const lines = [
    '| fixture | engine | really | grep | fleetgate | grep right | fleetgate right |',
    '|---|---|---|---|---|---|---|',
  ];
  let grepRight = 0;
  let fleetgateRight = 0;
  for (const row of rows) {
    const { grepOk, fleetgateOk } = rightness(row);
    if (grepOk) grepRight++;
    if (fleetgateOk) fleetgateRight++;
    const grep = row.grepLines.length > 0 ? `match (line ${row.grepLines.slice(0, 3).join(', ')})` : 'no match';
    lines.push(
      `| [${row.fixture.file}](${row.fixture.source}) | ${row.fixture.engine} | ${row.failed ? 'failed' : 'not failed'} | ${grep} | ${verdictWord(row.fleetgate)} | ${grepOk ? 'yes' : '**no**'} | ${fleetgateOk ? 'yes' : '**no**'} |`,
    );
  }
  lines.push(`| **${rows.length} fixtures** | | | | | **${grepRight}** | **${fleetgateRight}** |`);
  return lines.join('\n');
}

/** README's summary of the same: counts per engine, failed starts and healthy ones. */
export function verdictSummary(rows: readonly FixtureVerdicts[] = fixtureVerdicts()): string {
  const lines = ['| logs | count | grep right | fleetgate right |', '|---|---|---|---|'];
  const count = (group: readonly FixtureVerdicts[]) => [
    group.length,
    group.filter((row) => rightness(row).grepOk).length,
    group.filter((row) => rightness(row).fleetgateOk).length,
  ];
  for (const [engine, label] of [
    ['sglang', 'SGLang'],
    ['vllm', 'vLLM'],
  ]) {
    for (const failed of [true, false]) {
      const group = rows.filter((row) => row.fixture.engine === engine && row.failed === failed);
      lines.push(`| ${label}, ${failed ? 'failed to start' : 'healthy'} | ${count(group).join(' | ')} |`);
    }
  }
  lines.push(
    `| **all** | ${count(rows)
      .map((n) => `**${n}**`)
      .join(' | ')} |`,
  );
  return lines.join('\n');
}
