/**
 * The serving view of `fleetgate status`: the fleet's last-minute totals and, per backend that
 * serves, its rates, its streams' median time to first token and inter-token gap, its thinking
 * share (reasoning tokens over output tokens), reported load and the straggler mark. Pure text.
 */
import type { BackendStatus, FleetStatus } from '../admin/fleet-summary.js';
import type { BackendServing } from '../metrics/serving-stats.js';
import { STRAGGLER_RATIO } from '../metrics/stragglers.js';

const AMBER = '\x1b[33m';
const RESET = '\x1b[0m';
const HEADERS = [
  'NAME',
  'REQ/S',
  'TOK/S',
  'TOK/S/REQ',
  'TTFT P50',
  'ITL P50',
  'THINK',
  'RUNNING',
  'QUEUED',
  'KV',
  '',
] as const;

/** `0.25`, `4.1`, `1502`: two significant decimals for small rates, none for large ones. */
function rateText(value: number): string {
  if (value >= 100) return String(Math.round(value));
  if (value >= 10) return value.toFixed(1);
  return value.toFixed(2);
}

/** `8.5ms`, `412ms`, `12.4s`; `-` for none (or an older fleetgate that sends none). */
function secondsText(value: number | null | undefined): string {
  if (value == null) return '-';
  if (value < 0.01) return `${(value * 1000).toFixed(1)}ms`;
  if (value < 10) return `${Math.round(value * 1000)}ms`;
  return `${value.toFixed(1)}s`;
}

/** `62%`; `-` for none (or an older fleetgate that sends none). */
function shareText(value: number | null | undefined): string {
  return value == null ? '-' : `${Math.round(value * 100)}%`;
}

function count(value: number | null): string {
  return value === null ? '-' : String(Math.round(value));
}

/** `12.3 req/s, 4512 tok/s, 3 waiting, 2 retries, 1 resume, 0 errors in the last 60 s`. */
function servingLine(fleet: NonNullable<FleetStatus['serving']>): string {
  return [
    `${rateText(fleet.requests_per_second)} req/s`,
    `${rateText(fleet.tokens_per_second)} tok/s`,
    `${fleet.waiting} waiting`,
    `${fleet.retries} ${fleet.retries === 1 ? 'retry' : 'retries'}`,
    `${fleet.resumes} ${fleet.resumes === 1 ? 'resume' : 'resumes'}`,
    `${fleet.errors} ${fleet.errors === 1 ? 'error' : 'errors'} in the last ${fleet.window_seconds} s`,
  ].join(', ');
}

/** A ready backend, or one that served in the window (a drained or failed one finishing its work). */
function serves(b: BackendStatus): b is BackendStatus & { serving: BackendServing } {
  const s = b.serving;
  return s !== undefined && (b.state === 'ready' || s.requests_per_second > 0 || s.tokens_per_second > 0);
}

/** The serving block, newline-terminated; empty when fleetgate sent no serving figures. */
export function renderServing(status: FleetStatus, opts: { color: boolean }): string {
  if (status.serving === undefined) return '';
  const out = [`SERVING  ${servingLine(status.serving)}`];
  const rows = status.backends.filter(serves).map((b) => {
    const s = b.serving;
    return [
      b.name,
      rateText(s.requests_per_second),
      rateText(s.tokens_per_second),
      s.tokens_per_second_per_request === null ? '-' : rateText(s.tokens_per_second_per_request),
      secondsText(s.ttft_p50_seconds),
      secondsText(s.inter_token_p50_seconds),
      shareText(s.thinking_share),
      count(s.running),
      count(s.queued),
      s.kv_cache_usage === null ? '-' : `${Math.round(s.kv_cache_usage * 100)}%`,
      s.straggler ? 'straggler' : '',
    ];
  });
  if (rows.length > 0) {
    const widths = HEADERS.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
    const line = (cells: readonly string[]) =>
      cells
        .map((cell, i) => (i === 0 ? cell.padEnd(widths[i]) : i === cells.length - 1 ? cell : cell.padStart(widths[i])))
        .join('  ')
        .trimEnd();
    out.push(line(HEADERS));
    for (const row of rows) {
      const text = line(row);
      out.push(opts.color && row.at(-1) !== '' ? `${AMBER}${text}${RESET}` : text);
    }
    if (rows.some((r) => r.at(-1) !== '')) {
      out.push(`straggler: tokens/s per running request below ${STRAGGLER_RATIO}x the fleet's median`);
    }
  }
  return `${out.join('\n')}\n`;
}
