/**
 * Real log excerpts from public SGLang and vLLM issues (test/fixtures/logs/), with the verdict a
 * classifier should reach at the end of each (index.json).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LogEvent, Phase } from '../../src/fleet/logs/log-events.js';

export const LOG_FIXTURES_DIR = join(import.meta.dirname, '..', 'fixtures', 'logs');

export type FixtureState = 'failed' | 'starting' | 'ready-line-seen';

export interface ExpectedVerdict {
  state: FixtureState;
  phase?: Phase;
  /** A substring of the failure reason. */
  reason?: string;
  /** The whole failure reason. */
  reason_exact?: string;
  /** 1-based line from which the failure is known: the crash head or the fatal line. */
  head_line?: number;
  /** 1-based line of the start-up failure suspect that becomes the reason (exit or quiet confirm it). */
  suspect_line?: number;
}

export interface LogFixture {
  file: string;
  source: string;
  engine: 'sglang' | 'vllm';
  verdict: ExpectedVerdict;
  /** What really happened when the log alone cannot tell (a process that died without a line). */
  truth?: 'failed';
  note?: string;
}

export function loadLogFixtures(): LogFixture[] {
  const index = JSON.parse(readFileSync(join(LOG_FIXTURES_DIR, 'index.json'), 'utf8')) as { fixtures: LogFixture[] };
  return index.fixtures;
}

export function fixtureText(fixture: LogFixture): string {
  return readFileSync(join(LOG_FIXTURES_DIR, fixture.file), 'utf8');
}

export interface Verdict {
  state: FixtureState;
  phase: Phase | null;
  reason: string | null;
}

/**
 * What the events of one log say at its end, as the lifecycle reads them: a fatal sticks until a
 * start; a start-up failure suspect that no progress followed fails it, the end of the file being
 * the quiet that `health.failure_quiet` waits for.
 */
export function verdictOf(events: readonly LogEvent[]): Verdict {
  let verdict: Verdict = { state: 'starting', phase: null, reason: null };
  let suspect: string | null = null;
  for (const event of events) {
    switch (event.type) {
      case 'start':
        verdict = { state: 'starting', phase: null, reason: null };
        suspect = null;
        break;
      case 'phase':
        if (verdict.state !== 'failed') verdict.phase = event.phase;
        suspect = null;
        break;
      case 'ready':
        if (verdict.state !== 'failed') verdict.state = 'ready-line-seen';
        suspect = null;
        break;
      case 'suspect':
        if (verdict.state === 'starting') suspect = event.reason;
        break;
      case 'fatal':
        if (verdict.state !== 'failed') verdict = { ...verdict, state: 'failed', reason: event.reason };
        break;
      case 'fatal_reason':
        if (verdict.state === 'failed') verdict.reason = event.reason;
        break;
    }
  }
  if (suspect !== null && verdict.state === 'starting') verdict = { ...verdict, state: 'failed', reason: suspect };
  return verdict;
}

/** Asserts the parts of `actual` that the index states. */
export function assertVerdict(actual: Verdict, expected: ExpectedVerdict): void {
  assert.equal(actual.state, expected.state, `state (reason: ${actual.reason})`);
  if (expected.phase !== undefined) assert.equal(actual.phase, expected.phase, 'phase');
  if (expected.reason !== undefined) {
    assert.ok(
      actual.reason?.includes(expected.reason),
      `reason ${JSON.stringify(actual.reason)} names ${expected.reason}`,
    );
  }
  if (expected.reason_exact !== undefined) assert.equal(actual.reason, expected.reason_exact, 'reason');
}
