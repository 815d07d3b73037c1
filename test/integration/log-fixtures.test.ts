/**
 * Real log excerpts from public SGLang and vLLM issues (test/fixtures/logs/) written burst by burst
 * into log files that a real fleetgate follows, at the production poll interval (250 ms). Each
 * crash makes its backend `failed` within 1 s of its head line being written, before the rest of
 * its traceback exists, with a reason that names the error once the rest arrives. A bare traceback
 * (a start-up failure suspect) makes it `failed` once `health.failure_quiet` passes without progress.
 * No healthy excerpt ever makes its backend `failed`. The backends' ports are closed: only the log
 * speaks.
 */
import assert from 'node:assert/strict';
import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Gateway } from '../../src/app.js';
import { startGateway } from '../helpers/fleet.js';
import { fixtureText, type LogFixture, loadLogFixtures } from '../helpers/log-fixtures.js';
import { freePorts } from '../helpers/net.js';
import { waitFor } from '../helpers/wait.js';

const fixtures = loadLogFixtures();
const HEAD_DEADLINE_MS = 1_000;
const FAILURE_QUIET_MS = 1_000;

/** The file's lines in the bursts they are written in: before the head, the head alone, the rest. */
function bursts(fixture: LogFixture): string[][] {
  const lines = fixtureText(fixture).replace(/\n$/, '').split('\n');
  const head = fixture.verdict.head_line ?? fixture.verdict.suspect_line;
  const cuts = head === undefined ? [Math.ceil(lines.length / 2)] : [head - 1, head];
  const pieces: string[][] = [];
  let from = 0;
  for (const cut of [...cuts, lines.length]) {
    if (cut > from) pieces.push(lines.slice(from, cut));
    from = cut;
  }
  return pieces;
}

describe('real log excerpts through the log watcher', { concurrency: 4 }, () => {
  let gateway: Gateway;
  let dir: string;
  const transitions = new Map<string, string[]>();
  const cleanups: Array<() => unknown> = [];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'fleetgate-log-fixtures-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    // Closed ports: nothing answers HTTP, so every state change comes from the log.
    const ports = await freePorts(fixtures.length);
    await Promise.all(fixtures.map((_, i) => writeFile(join(dir, `${i}.log`), '')));
    ({ gateway } = await startGateway(
      { after: (fn: () => unknown) => cleanups.push(fn) },
      {
        backends: fixtures.map((fixture, i) => ({
          url: `http://127.0.0.1:${ports[i]}`,
          name: `fixture${i}`,
          kind: fixture.engine,
          log: join(dir, `${i}.log`),
        })),
        health: { failure_quiet: `${FAILURE_QUIET_MS}ms` },
      },
    ));
    gateway.fleet.registry.on('transition', ({ backend, to }) => {
      const seen = transitions.get(backend.name) ?? [];
      seen.push(to);
      transitions.set(backend.name, seen);
    });
  });

  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  fixtures.forEach((fixture, i) => {
    const name = `fixture${i}`;
    test(`${fixture.file} (${fixture.verdict.state})`, async () => {
      const snapshot = () => gateway.fleet.registry.get(name)?.lifecycle.snapshot;
      let linesWritten = 0;
      for (const burst of bursts(fixture)) {
        const isHead = fixture.verdict.head_line === linesWritten + 1;
        const last = burst.filter((line) => line !== '').at(-1) ?? '';
        const writtenAt = performance.now();
        await appendFile(join(dir, `${i}.log`), `${burst.join('\n')}\n`);
        linesWritten += burst.length;
        if (isHead) {
          await waitFor(() => snapshot()?.state === 'failed', {
            timeoutMs: HEAD_DEADLINE_MS,
            intervalMs: 5,
            what: `failed after the head line ${JSON.stringify(burst[0].slice(0, 80))}`,
          });
          const after = performance.now() - writtenAt;
          assert.ok(after < HEAD_DEADLINE_MS, `failed ${after.toFixed(0)} ms after its head line`);
          assert.ok(snapshot()?.reason, 'a reason from the head line');
        }
        // Every line of the burst has been read: the lifecycle saw its last one.
        await waitFor(() => snapshot()?.lastLogLine?.startsWith(last.slice(0, 200)), {
          timeoutMs: 3_000,
          what: `the burst ending ${JSON.stringify(last.slice(0, 80))} read`,
        });
        const knownAt = fixture.verdict.head_line ?? fixture.verdict.suspect_line;
        if (knownAt === undefined || linesWritten < knownAt) {
          assert.notEqual(snapshot()?.state, 'failed', `not failed before its head (${snapshot()?.reason})`);
        }
      }
      if (fixture.verdict.state === 'failed') {
        // A suspect fails it once failure_quiet passed without progress (the registry ticks each second).
        await waitFor(() => snapshot()?.state === 'failed', {
          timeoutMs: FAILURE_QUIET_MS + 4_000,
          what: `failed (${snapshot()?.reason})`,
        });
        const seen = transitions.get(name) ?? [];
        assert.equal(seen.at(-1), 'failed', `stays failed: ${seen.join(' -> ')}`);
        const reason = snapshot()?.reason ?? '';
        if (fixture.verdict.reason !== undefined) assert.ok(reason.includes(fixture.verdict.reason), reason);
        if (fixture.verdict.reason_exact !== undefined) assert.equal(reason, fixture.verdict.reason_exact);
      } else {
        const seen = transitions.get(name) ?? [];
        assert.ok(!seen.includes('failed'), `never failed: ${seen.join(' -> ')} (${snapshot()?.reason})`);
      }
    });
  });
});
