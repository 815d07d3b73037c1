/** Pure text rendering of a fleet status for the terminal: `fleetgate status` table, colours, summary line. */
import type { BackendStatus, FleetStatus } from '../admin/fleet-summary.js';
import { PHASE_WORDS, phaseText } from '../admin/phase-words.js';
import type { BackendState } from '../fleet/backend-lifecycle.js';
import { renderKvEvents } from './render-kv.js';
import { renderServing } from './render-serving.js';

const RESET = '\x1b[0m';
/** As on the status page: ready green, starting blue (amber when stalled), failed red, unhealthy orange. */
const STATE_SGR: Readonly<Record<BackendState | 'stalled', string>> = {
  ready: '\x1b[32m',
  starting: '\x1b[34m',
  stalled: '\x1b[33m',
  failed: '\x1b[1;31m',
  unhealthy: '\x1b[38;5;208m',
  draining: '\x1b[37m',
  down: '\x1b[90m',
};

/** Colour on a TTY unless `NO_COLOR` is set (no-color.org); `FORCE_COLOR` (not 0) forces it on. */
export function colorEnabled(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.NO_COLOR) return false;
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '' && env.FORCE_COLOR !== '0') return true;
  return stream.isTTY === true;
}

export function paintState(text: string, backend: Pick<BackendStatus, 'state' | 'reason'>, color: boolean): string {
  if (!color) return text;
  const key = backend.state === 'starting' && backend.reason === 'stalled' ? 'stalled' : backend.state;
  return `${STATE_SGR[key] ?? ''}${text}${RESET}`;
}

/** `44s`, `1m04s`, `2h05m`. */
export function shortDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

/** `loading weights 66/83 (79%, ETA 44s)`, `warming up`, `ready in 42s`, or `-`. */
export function progressText(b: BackendStatus): string {
  if (b.state === 'ready') return b.ready_seconds === null ? '-' : `ready in ${shortDuration(b.ready_seconds)}`;
  const phase = phaseText(b);
  if (phase === null) return '-';
  // A failed (or drained, or down) backend is not moving on: where it stopped, no ETA.
  if (b.state === 'failed') return `stopped at ${phase}`;
  if (b.state !== 'starting') return phase;
  const extras: string[] = [];
  if (b.progress !== null && b.progress.total > 0)
    extras.push(`${Math.floor((b.progress.done / b.progress.total) * 100)}%`);
  if (b.eta_seconds !== null) extras.push(`ETA ${shortDuration(b.eta_seconds)}`);
  return extras.length > 0 ? `${phase} (${extras.join(', ')})` : phase;
}

/**
 * `5/7 ready, 1 failed, 1 loading weights 66/83`: ready count first, then the other states, then
 * starting backends grouped by phase (with progress when a phase has just one backend).
 */
export function summaryLine(status: Pick<FleetStatus, 'backends'>): string {
  const backends = status.backends;
  const counts = new Map<string, number>();
  const phases = new Map<string, BackendStatus[]>();
  let ready = 0;
  for (const b of backends) {
    if (b.state === 'ready') ready++;
    else if (b.state === 'starting' && b.phase !== null) {
      const words = PHASE_WORDS[b.phase] ?? b.phase.replaceAll('_', ' ');
      phases.set(words, [...(phases.get(words) ?? []), b]);
    } else counts.set(b.state, (counts.get(b.state) ?? 0) + 1);
  }
  const parts = [`${ready}/${backends.length} ready`];
  for (const state of ['starting', 'unhealthy', 'draining', 'failed', 'down']) {
    const n = counts.get(state);
    if (n) parts.push(`${n} ${state}`);
  }
  for (const [words, group] of phases) {
    const p = group.length === 1 ? group[0].progress : null;
    parts.push(`${group.length} ${words}${p ? ` ${p.done}/${p.total}` : ''}`);
  }
  return parts.join(', ');
}

/** Cuts `text` to `width` characters, ending with `…` when cut. */
export function truncate(text: string, width: number): string {
  if (width <= 0) return '';
  return text.length <= width ? text : `${text.slice(0, width - 1)}…`;
}

export interface TableOptions {
  color: boolean;
  /** Terminal width: the REASON column is cut to fit. Unlimited when absent (pipes, files). */
  width?: number;
}

const HEADERS = ['NAME', 'STATE', 'PHASE/PROGRESS', 'INFLIGHT', 'REASON'] as const;

/** The `fleetgate status` table, its summary line and the serving view, newline-terminated. */
export function renderTable(status: FleetStatus, opts: TableOptions): string {
  if (status.backends.length === 0) return 'no backends configured\n';
  const rows = status.backends.map((b) => [b.name, b.state, progressText(b), String(b.inflight), b.reason ?? '']);
  const widths = HEADERS.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const fixed = widths.slice(0, 4).reduce((sum, w) => sum + w + 2, 0);
  const reasonWidth = opts.width === undefined ? Number.POSITIVE_INFINITY : Math.max(10, opts.width - fixed - 1);
  const line = (cells: readonly string[], b?: BackendStatus) =>
    cells
      .map((cell, i) => {
        if (i === 4) return truncate(cell, reasonWidth);
        const padded = i === 3 ? cell.padStart(widths[i]) : cell.padEnd(widths[i]);
        return i === 1 && b ? paintState(padded, b, opts.color) : padded;
      })
      .join('  ')
      .trimEnd();
  const out = [line(HEADERS), ...rows.map((r, i) => line(r, status.backends[i]))];
  const low = status.ready < status.min_ready ? ` (below min_ready ${status.min_ready})` : '';
  // The summary stays the last line (scripts read it with `tail -1`); the serving view comes before it.
  const serving = renderServing(status, opts);
  if (serving !== '') out.push('', serving.trimEnd());
  const models = modelLines(status.backends);
  if (models.length > 0) out.push('', ...models);
  const engines = renderEngines(status.backends);
  if (engines !== null) out.push('', engines);
  const kv = renderKvEvents(status.backends);
  if (kv !== null) out.push('', kv);
  out.push('', `${summaryLine(status)}${low}`);
  return `${out.join('\n')}\n`;
}

const ENGINE_HEADERS = ['NAME', 'PID', 'RESTARTS', 'LAST EXIT', 'NEXT RESTART', 'REMEDY'] as const;

/** `code 1`, `SIGKILL`, or `-`. */
function exitText(exit: { code: number | null; signal: string | null } | null): string {
  if (exit === null) return '-';
  return exit.signal !== null ? exit.signal : `code ${exit.code}`;
}

/** The engines `fleetgate launch` supervises: a second table, or null when there are none. */
export function renderEngines(backends: readonly BackendStatus[], now = Date.now()): string | null {
  const supervised = backends.filter((b) => b.supervision);
  if (supervised.length === 0) return null;
  const rows = supervised.map((b) => {
    const s = b.supervision!;
    const next = s.next_restart_at === null ? '-' : `in ${shortDuration((Date.parse(s.next_restart_at) - now) / 1000)}`;
    return [b.name, String(s.pid ?? '-'), String(s.restarts), exitText(s.last_exit), next, s.remedy ?? '-'];
  });
  const widths = ENGINE_HEADERS.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => cell.padEnd(widths[i]))
      .join('  ')
      .trimEnd();
  return ['engines started by fleetgate launch:', line(ENGINE_HEADERS), ...rows.map(line)].join('\n');
}

/** With several models served: `org/model-a: 3/3 ready (gpu0, gpu1, gpu2)`, one line per model. */
export function modelLines(backends: readonly BackendStatus[]): string[] {
  const byModel = new Map<string, BackendStatus[]>();
  for (const b of backends) {
    const model = b.models?.[0];
    if (model !== undefined) byModel.set(model, [...(byModel.get(model) ?? []), b]);
  }
  if (byModel.size < 2) return [];
  return [...byModel].map(([model, group]) => {
    const ready = group.filter((b) => b.state === 'ready').length;
    return `${model}: ${ready}/${group.length} ready (${group.map((b) => b.name).join(', ')})`;
  });
}
