/** Terminal rendering of the fleet for `fleetgate status` and `fleetgate wait`: pure, no sockets. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BackendStatus, FleetStatus } from '../../src/admin/fleet-summary.js';
import { phaseText } from '../../src/admin/phase-words.js';
import {
  colorEnabled,
  modelLines,
  progressText,
  renderEngines,
  renderTable,
  shortDuration,
  summaryLine,
} from '../../src/cli/render-status.js';
import {
  changeKey,
  failedBackends,
  parseReadyTarget,
  progressBar,
  targetReached,
  timestamp,
  waitFrame,
  waitLine,
} from '../../src/cli/render-wait.js';
import { parseWaitArgs } from '../../src/cli/wait.js';

const OOM =
  'Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 5 has a total capacity of 79.15 GiB';

function backend(name: string, fields: Partial<BackendStatus> = {}): BackendStatus {
  return {
    name,
    url: `http://127.0.0.1:3000${name.slice(-1)}`,
    kind: 'sglang',
    models: ['meta-llama/Llama-3.1-8B-Instruct'],
    state: 'ready',
    phase: null,
    progress: null,
    eta_seconds: null,
    reason: null,
    inflight: 0,
    inflight_cap: null,
    cache_hit_rate: null,
    since: '2026-11-29T12:01:05.120Z',
    ready_seconds: null,
    last_log_line: null,
    ...fields,
  };
}

function fleet(backends: BackendStatus[], minReady = 1): FleetStatus {
  const states: FleetStatus['states'] = {};
  for (const b of backends) states[b.state] = (states[b.state] ?? 0) + 1;
  return {
    ready: backends.filter((b) => b.state === 'ready').length,
    total: backends.length,
    min_ready: minReady,
    states,
    backends,
  };
}

/** The demo's fleet mid-start: 5 ready, one loading, one failed during capture. */
const midStart = fleet([
  backend('gpu0', { ready_seconds: 42.3, inflight: 12 }),
  backend('gpu1', { inflight: 11 }),
  backend('gpu2', { inflight: 9 }),
  backend('gpu3', {
    state: 'starting',
    phase: 'loading_weights',
    progress: { done: 66, total: 83 },
    eta_seconds: 44,
  }),
  backend('gpu4', { inflight: 10 }),
  backend('gpu5', { state: 'failed', reason: OOM }),
  backend('gpu6', { inflight: 12 }),
]);

const ESC = String.fromCharCode(27);
const ANSI = new RegExp(`${ESC}\\[[0-9;]*m`, 'g');

test('phase in words, with progress where known', () => {
  assert.equal(phaseText({ phase: 'loading_weights', progress: { done: 66, total: 83 } }), 'loading weights 66/83');
  assert.equal(
    phaseText({ phase: 'capturing_cuda_graphs', progress: { done: 21, total: 52 } }),
    'capturing CUDA graphs 21/52',
  );
  assert.equal(phaseText({ phase: 'warming_up', progress: null }), 'warming up');
  assert.equal(phaseText({ phase: null, progress: null }), null);
  assert.equal(phaseText({ phase: 'some_new_phase', progress: null }), 'some new phase');
  assert.equal(progressText(midStart.backends[3]), 'loading weights 66/83 (79%, ETA 44s)');
  assert.equal(progressText(midStart.backends[0]), 'ready in 42s');
  assert.equal(progressText(midStart.backends[1]), '-');
  // Stopped backends show where they stopped, without an ETA.
  const stopped = backend('gpu5', {
    state: 'failed',
    phase: 'capturing_cuda_graphs',
    progress: { done: 26, total: 52 },
    eta_seconds: 3,
  });
  assert.equal(progressText(stopped), 'stopped at capturing CUDA graphs 26/52');
  assert.equal(progressText({ ...stopped, state: 'draining' }), 'capturing CUDA graphs 26/52');
});

test('summary line: ready count, other states, starting backends by phase', () => {
  assert.equal(summaryLine(midStart), '5/7 ready, 1 failed, 1 loading weights 66/83');
  const starting = fleet([
    backend('a', { state: 'starting', phase: 'loading_weights', progress: { done: 3, total: 83 } }),
    backend('b', { state: 'starting', phase: 'loading_weights', progress: { done: 9, total: 83 } }),
    backend('c', { state: 'starting', phase: 'warming_up' }),
    backend('d', { state: 'down' }),
    backend('e', { state: 'starting' }),
  ]);
  assert.equal(summaryLine(starting), '0/5 ready, 1 starting, 1 down, 2 loading weights, 1 warming up');
  assert.equal(summaryLine(fleet([])), '0/0 ready');
});

test('table: a header, one row per backend with every column, then the summary; no colour when asked', () => {
  const out = renderTable(midStart, { color: false });
  const lines = out.trimEnd().split('\n');
  assert.match(lines[0], /^NAME\s+STATE\s+PHASE\/PROGRESS\s+INFLIGHT\s+REASON$/);
  assert.equal(lines.length, 1 + 7 + 2);
  assert.match(lines[1], /^gpu0\s+ready\s+ready in 42s\s+12$/);
  assert.match(lines[4], /^gpu3\s+starting\s+loading weights 66\/83 \(79%, ETA 44s\)\s+0$/);
  // Without a width (a pipe) the reason is whole.
  assert.ok(lines[6].startsWith('gpu5  failed'));
  assert.ok(lines[6].endsWith(OOM));
  assert.equal(lines[8], '');
  assert.equal(lines[9], '5/7 ready, 1 failed, 1 loading weights 66/83');
  assert.doesNotMatch(out, ANSI);
  // Columns line up: STATE starts at the same offset on every row.
  const offsets = lines.slice(0, 8).map((l) => l.search(/(STATE|ready|starting|failed)/));
  assert.equal(new Set(offsets).size, 1);
});

test('table on a terminal: state coloured, reason cut to the width', () => {
  const out = renderTable(midStart, { color: true, width: 100 });
  assert.match(out, new RegExp(`${ESC}\\[32mready\\s*${ESC}\\[0m`));
  assert.match(out, new RegExp(`${ESC}\\[1;31mfailed\\s*${ESC}\\[0m`));
  for (const line of out.replace(ANSI, '').split('\n')) assert.ok(line.length < 100, `too wide: ${line}`);
  assert.match(out.replace(ANSI, ''), /gpu5 {2}failed .* Exception: Capture cuda.*…\n/);
});

test('table: below min_ready is said; an empty fleet is said', () => {
  const none = fleet([backend('gpu0', { state: 'down', reason: 'connection refused' })], 2);
  assert.match(renderTable(none, { color: false }), /0\/1 ready, 1 down \(below min_ready 2\)\n$/);
  assert.equal(renderTable(fleet([]), { color: false }), 'no backends configured\n');
});

function serving(fields: Partial<NonNullable<BackendStatus['serving']>> = {}): NonNullable<BackendStatus['serving']> {
  return {
    requests_per_second: 0.5,
    tokens_per_second: 412.26,
    tokens_per_second_per_request: 51.5,
    running: 8,
    queued: 0,
    kv_cache_usage: 0.42,
    straggler: false,
    ttft_p50_seconds: 0.0452,
    inter_token_p50_seconds: 0.0213,
    thinking_share: null,
    ...fields,
  };
}

/** The demo's fleet under load: three serving, gpu2 a straggler, gpu3 still loading, gpu4 failed. */
const underLoad: FleetStatus = {
  ...fleet([
    backend('gpu0', { inflight: 8, serving: serving() }),
    backend('gpu1', {
      inflight: 8,
      serving: serving({ requests_per_second: 0.55, tokens_per_second: 398, thinking_share: 0.624 }),
    }),
    backend('gpu2', {
      inflight: 8,
      serving: serving({
        requests_per_second: 0.1,
        tokens_per_second: 96,
        tokens_per_second_per_request: 12,
        queued: 3,
        kv_cache_usage: 0.913,
        straggler: true,
        ttft_p50_seconds: 12.42,
        inter_token_p50_seconds: 0.0064,
      }),
    }),
    backend('gpu3', {
      state: 'starting',
      phase: 'loading_weights',
      progress: { done: 6, total: 83 },
      serving: serving({
        requests_per_second: 0,
        tokens_per_second: 0,
        tokens_per_second_per_request: null,
        running: null,
        queued: null,
        kv_cache_usage: null,
        ttft_p50_seconds: null,
        inter_token_p50_seconds: null,
      }),
    }),
    backend('gpu4', {
      state: 'failed',
      reason: OOM,
      serving: serving({ requests_per_second: 0, tokens_per_second: 0 }),
    }),
  ]),
  serving: {
    window_seconds: 60,
    requests_per_second: 1.15,
    tokens_per_second: 906.3,
    waiting: 3,
    retries: 1,
    resumes: 2,
    errors: 0,
  },
};

test('serving view: fleet totals, then one row per serving backend with rates, reported load, straggler', () => {
  const out = renderTable(underLoad, { color: false });
  const lines = out.trimEnd().split('\n');
  const at = lines.findIndex((l) => l.startsWith('SERVING'));
  assert.ok(at > 0, out);
  assert.equal(lines[at - 1], '', 'a blank line after the backend table');
  assert.equal(lines[at], 'SERVING  1.15 req/s, 906 tok/s, 3 waiting, 1 retry, 2 resumes, 0 errors in the last 60 s');
  assert.match(
    lines[at + 1],
    /^NAME\s+REQ\/S\s+TOK\/S\s+TOK\/S\/REQ\s+TTFT P50\s+ITL P50\s+THINK\s+RUNNING\s+QUEUED\s+KV$/,
  );
  assert.match(lines[at + 2], /^gpu0\s+0\.50\s+412\s+51\.5\s+45ms\s+21ms\s+-\s+8\s+0\s+42%$/);
  // The thinking share: reasoning tokens over output tokens in the window.
  assert.match(lines[at + 3], /^gpu1\s+0\.55\s+398\s+51\.5\s+45ms\s+21ms\s+62%\s+8\s+0\s+42%$/);
  assert.match(lines[at + 4], /^gpu2\s+0\.10\s+96\.0\s+12\.0\s+12\.4s\s+6\.4ms\s+-\s+8\s+3\s+91%\s+straggler$/);
  // A backend still loading, or failed with nothing served in the window, has no serving row.
  assert.ok(!lines.slice(at).some((l) => /^gpu[34]/.test(l)));
  assert.equal(lines[at + 5], "straggler: tokens/s per running request below 0.7x the fleet's median");
  // The fleet's summary line stays last, after the serving block.
  assert.equal(lines[at + 6], '');
  assert.match(lines[at + 7], /^3\/5 ready, 1 failed, 1 loading weights 6\/83$/);
  assert.equal(lines.length, at + 8);
  // Numbers are right-aligned: every row, the header too, ends its KV column at the same offset.
  const ends = lines.slice(at + 1, at + 5).map((l) => l.replace(/\s+straggler$/, '').length);
  assert.equal(new Set(ends).size, 1, lines.slice(at + 1, at + 5).join('\n'));
});

test('serving view: a straggler row is amber on a terminal; no serving figures, no block', () => {
  const out = renderTable(underLoad, { color: true });
  assert.match(out, new RegExp(`${ESC}\\[33mgpu2 .*straggler${ESC}\\[0m`));
  assert.doesNotMatch(out, new RegExp(`${ESC}\\[33mgpu0`));
  assert.doesNotMatch(renderTable(midStart, { color: false }), /SERVING/, 'an older fleetgate sends none');
  const idle = {
    ...underLoad,
    backends: underLoad.backends.map((b) => ({ ...b, serving: serving({ straggler: false }) })),
  };
  assert.doesNotMatch(
    renderTable(idle, { color: false }),
    /^straggler:/m,
    'the rule is explained only when one is marked',
  );
});

test('colour: TTY only, NO_COLOR wins, FORCE_COLOR forces', () => {
  assert.equal(colorEnabled({ isTTY: true }, {}), true);
  assert.equal(colorEnabled({ isTTY: false }, {}), false);
  assert.equal(colorEnabled({}, {}), false);
  assert.equal(colorEnabled({ isTTY: true }, { NO_COLOR: '1' }), false);
  assert.equal(colorEnabled({ isTTY: false }, { FORCE_COLOR: '1' }), true);
  assert.equal(colorEnabled({ isTTY: true }, { FORCE_COLOR: '0' }), true);
});

test('durations', () => {
  assert.equal(shortDuration(0), '0s');
  assert.equal(shortDuration(44.4), '44s');
  assert.equal(shortDuration(64), '1m04s');
  assert.equal(shortDuration(7500), '2h05m');
});

test('wait: --ready parses N or all, nothing else', () => {
  assert.equal(parseReadyTarget('all'), 'all');
  assert.equal(parseReadyTarget('3'), 3);
  for (const bad of ['many', '0', '-1', '2.5', '', ' 3', 'ALL']) assert.equal(parseReadyTarget(bad), null, bad);
});

test('wait: argument errors name the flag', () => {
  assert.match(String(parseWaitArgs(['--ready', 'many'], {})), /--ready .*'many'/);
  assert.match(String(parseWaitArgs(['--timeout', 'soon'], {})), /--timeout .*'soon'/);
  assert.match(String(parseWaitArgs(['--timeout', '30'], {})), /--timeout/);
  assert.match(String(parseWaitArgs(['--url', 'ftp://x'], {})), /--url/);
  assert.match(String(parseWaitArgs(['--bogus'], {})), /bogus/);
  assert.match(String(parseWaitArgs(['extra'], {})), /extra/);
  assert.equal(parseWaitArgs(['--help'], {}), null);
  const ok = parseWaitArgs(['--ready', '3', '--timeout', '10m', '--fail-fast', '--url', '10.0.0.2:9000'], {});
  assert.ok(typeof ok === 'object' && ok !== null);
  assert.equal(ok.target, 3);
  assert.equal(ok.timeoutMs, 600_000);
  assert.equal(ok.failFast, true);
  assert.equal(ok.base.href, 'http://10.0.0.2:9000/');
  const defaults = parseWaitArgs([], { FLEETGATE_URL: 'http://gw:8080/prefix' });
  assert.ok(typeof defaults === 'object' && defaults !== null);
  assert.equal(defaults.target, 'all');
  assert.equal(defaults.timeoutMs, null);
  assert.equal(defaults.base.href, 'http://gw:8080/prefix/');
});

test('wait: target reached, `all` ignores drained backends and an empty fleet never counts', () => {
  assert.equal(targetReached(midStart, 5), true);
  assert.equal(targetReached(midStart, 6), false);
  assert.equal(targetReached(midStart, 'all'), false);
  const drained = fleet([backend('a'), backend('b', { state: 'draining', reason: 'drained by operator' })]);
  assert.equal(targetReached(drained, 'all'), true);
  assert.equal(targetReached(fleet([]), 'all'), false);
  assert.deepEqual(
    failedBackends(midStart).map((b) => b.name),
    ['gpu5'],
  );
});

test('wait: one line names every backend that is not ready', () => {
  assert.equal(waitLine(midStart, 'all'), `5/7 ready; gpu3 loading weights 66/83; gpu5 failed: ${OOM.slice(0, 119)}…`);
  assert.equal(waitLine(midStart, 6).split(';')[0], '5/7 ready (want 6)');
  assert.equal(waitLine(fleet([backend('a')]), 'all'), '1/1 ready');
  const cold = fleet([
    backend('gpu0', { state: 'down', reason: 'connection refused' }),
    backend('gpu1', { state: 'down', reason: 'connection refused' }),
    backend('gpu2', { state: 'starting', phase: 'warming_up' }),
    backend('gpu3', { state: 'starting', phase: 'warming_up' }),
    backend('gpu4', { state: 'starting' }),
  ]);
  assert.equal(
    waitLine(cold, 'all'),
    '0/5 ready; gpu0 gpu1 down: connection refused; gpu2 gpu3 warming up; gpu4 starting',
  );
});

test('wait: progress alone does not change the line key; a phase or state change does', () => {
  const at = (done: number, phase = 'loading_weights', state: BackendStatus['state'] = 'starting') =>
    changeKey(fleet([backend('gpu3', { state, phase, progress: { done, total: 83 } })]));
  assert.equal(at(10), at(11));
  assert.notEqual(at(10), at(10, 'capturing_cuda_graphs'));
  assert.notEqual(at(10), at(10, 'loading_weights', 'failed'));
});

test('wait: timestamps are local [HH:MM:SS]', () => {
  assert.equal(timestamp(new Date(2026, 10, 29, 9, 5, 7)), '[09:05:07] ');
});

test('wait: the TTY frame has a bar per backend and never a line wider than the terminal', () => {
  assert.equal(progressBar(0.5, 10), '█████░░░░░');
  assert.equal(progressBar(2, 4), '████');
  const frame = waitFrame(midStart, {
    target: 'all',
    color: false,
    width: 80,
    elapsedMs: 65_000,
    timeoutMs: 600_000,
    error: null,
  });
  assert.equal(frame.length, 1 + 7);
  assert.match(frame[0], /^waited 1m05s of 10m00s · 5\/7 ready, 1 failed, 1 loading weights 66\/83$/);
  assert.match(frame[4], /^gpu3 {2}starting {3}█{16}░{4} {2}loading weights 66\/83 \(79%, ETA 44s\)$/);
  assert.match(frame[6], /^gpu5 {2}failed {5}░{20} {2}Exception: Capture cuda graph failed/);
  for (const line of frame) assert.ok(line.length < 80, `too wide: ${line}`);
  const narrow = waitFrame(midStart, { target: 3, color: true, width: 30, elapsedMs: 0, timeoutMs: null, error: null });
  for (const line of narrow) assert.ok(line.replace(ANSI, '').length < 30, `too wide: ${line}`);
  const connecting = waitFrame(null, {
    target: 'all',
    color: false,
    width: 100,
    elapsedMs: 2000,
    timeoutMs: null,
    error: 'cannot reach fleetgate at http://127.0.0.1:8080/: connection refused',
  });
  assert.deepEqual(connecting, ['waited 2s · cannot reach fleetgate at http://127.0.0.1:8080/: connection refused']);
});

test('engines table: pid, restarts, last exit, next restart and remedy, only when some backend is launched', () => {
  const now = Date.parse('2026-11-29T12:00:00.000Z');
  assert.equal(renderEngines([backend('gpu0')], now), null);
  const text = renderEngines(
    [
      backend('gpu0', {
        supervision: { pid: 4242, restarts: 0, last_exit: null, next_restart_at: null, remedy: null },
      }),
      backend('gpu3', {
        state: 'failed',
        supervision: {
          pid: null,
          restarts: 2,
          last_exit: { code: null, signal: 'SIGKILL' },
          next_restart_at: '2026-11-29T12:00:40.000Z',
          remedy: '--mem-fraction-static 0.88 -> 0.83',
        },
      }),
    ],
    now,
  );
  assert.equal(
    text,
    [
      'engines started by fleetgate launch:',
      'NAME  PID   RESTARTS  LAST EXIT  NEXT RESTART  REMEDY',
      'gpu0  4242  0         -          -             -',
      'gpu3  -     2         SIGKILL    in 40s        --mem-fraction-static 0.88 -> 0.83',
    ].join('\n'),
  );
});

test('with several models, one line per model: ready count and its backends; none with one model', () => {
  const status = {
    ready: 3,
    total: 4,
    min_ready: 1,
    states: { ready: 3, failed: 1 },
    backends: [
      backend('gpu0', { models: ['org/a'] }),
      backend('gpu1', { models: ['org/a'] }),
      backend('gpu2', { models: ['org/b'] }),
      backend('gpu3', { models: ['org/b'], state: 'failed', reason: 'Not enough memory' }),
    ],
  };
  const lines = renderTable(status, { color: false }).trimEnd().split('\n');
  const at = lines.indexOf('org/a: 2/2 ready (gpu0, gpu1)');
  assert.deepEqual(lines.slice(at, at + 2), ['org/a: 2/2 ready (gpu0, gpu1)', 'org/b: 1/2 ready (gpu2, gpu3)']);
  assert.match(lines.at(-1) ?? '', /^3\/4 ready/, 'the summary stays last');
  assert.deepEqual(modelLines([backend('gpu0'), backend('gpu1')]), []);
});

test("renderTable: each backend's KV events (live, stale, off) and blocks held, once any stream is on", () => {
  const quiet = renderTable(fleet([backend('gpu0', { kv_events: { state: 'off', blocks: 0 } })]), { color: false });
  assert.doesNotMatch(quiet, /KV/, 'a fleet without events reads as before');
  const text = renderTable(
    fleet([
      backend('gpu0', { kv_events: { state: 'live', blocks: 12_345 } }),
      backend('gpu1', { kv_events: { state: 'stale', blocks: 0 } }),
      backend('gpu2', { kv_events: { state: 'off', blocks: 0 } }),
    ]),
    { color: false },
  );
  const lines = text.split('\n');
  const at = lines.findIndex((l) => l.startsWith('KV-cache events'));
  assert.ok(at > 0, text);
  assert.deepEqual(lines.slice(at + 1, at + 5), [
    'NAME  KV EVENTS  BLOCKS',
    'gpu0  live       12,345',
    'gpu1  stale           0',
    'gpu2  off             -',
  ]);
  assert.match(lines.at(-2) ?? '', /^3\/3 ready/, 'the summary stays the last line');
});
