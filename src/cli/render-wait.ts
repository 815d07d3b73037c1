/**
 * Pure decisions and text for `fleetgate wait`: when the target is met, what a log line says, and the
 * live frame drawn on a TTY.
 */
import type { BackendStatus, FleetStatus } from '../admin/fleet-summary.js';
import { phaseText } from '../admin/phase-words.js';
import { paintState, progressText, shortDuration, summaryLine, truncate } from './render-status.js';

/** A number of ready backends, or `all`: every backend not drained by an operator. */
export type ReadyTarget = number | 'all';

export function parseReadyTarget(value: string): ReadyTarget | null {
  if (value === 'all') return 'all';
  if (!/^\d+$/.test(value)) return null;
  const n = Number(value);
  return n >= 1 && Number.isSafeInteger(n) ? n : null;
}

/** How many ready backends the target asks for now (`all` follows backends added or removed). */
function wanted(status: FleetStatus, target: ReadyTarget): number {
  if (target !== 'all') return target;
  return status.backends.filter((b) => b.state !== 'draining').length;
}

export function targetReached(status: FleetStatus, target: ReadyTarget): boolean {
  const want = wanted(status, target);
  // `all` of an empty fleet is nothing to wait for yet: backends may still be added.
  return want > 0 && status.ready >= want;
}

export function failedBackends(status: FleetStatus): BackendStatus[] {
  return status.backends.filter((b) => b.state === 'failed');
}

const LINE_REASON_CHARS = 120;

function notReadyText(b: BackendStatus): string {
  const reason = b.reason ? `: ${truncate(b.reason, LINE_REASON_CHARS)}` : '';
  if (b.state === 'starting') return `${phaseText(b) ?? 'starting'}${reason}`;
  return `${b.state}${reason}`;
}

/**
 * `3/7 ready; gpu3 failed: Not enough memory...; gpu5 loading weights 66/83`. Backends saying the
 * same thing share one entry (`gpu0 gpu1 gpu2 down: connection refused`), so 7 GPUs fit a line.
 */
export function waitLine(status: FleetStatus, target: ReadyTarget): string {
  const want = target === 'all' ? '' : ` (want ${target})`;
  const groups = new Map<string, string[]>();
  for (const b of status.backends) {
    if (b.state === 'ready') continue;
    const text = notReadyText(b);
    groups.set(text, [...(groups.get(text) ?? []), b.name]);
  }
  const parts = [`${status.ready}/${status.backends.length} ready${want}`];
  for (const [text, names] of groups) parts.push(`${names.join(' ')} ${text}`);
  return parts.join('; ');
}

/**
 * What makes a new log line worth printing at once: states, phases and reasons. Progress alone
 * (a loading bar ticking) is printed at a slower pace, or a 7-GPU start would write thousands of lines.
 */
export function changeKey(status: FleetStatus): string {
  return status.backends.map((b) => `${b.name}\u0000${b.state}\u0000${b.phase}\u0000${b.reason}`).join('\u0001');
}

/** `[12:01:05] ` in local time, as people read a terminal. */
export function timestamp(date: Date): string {
  const two = (n: number) => String(n).padStart(2, '0');
  return `[${two(date.getHours())}:${two(date.getMinutes())}:${two(date.getSeconds())}] `;
}

export function progressBar(ratio: number, width: number): string {
  const filled = Math.round(Math.min(1, Math.max(0, ratio)) * width);
  return '█'.repeat(filled) + '░'.repeat(width - filled);
}

function ratioOf(b: BackendStatus): number {
  if (b.state === 'ready') return 1;
  return b.progress !== null && b.progress.total > 0 ? b.progress.done / b.progress.total : 0;
}

export interface FrameOptions {
  target: ReadyTarget;
  color: boolean;
  /** Terminal columns; every line is kept shorter so it never wraps (wrapping breaks the redraw). */
  width: number;
  elapsedMs: number;
  timeoutMs: number | null;
  /** Why the latest poll failed, if it did. */
  error: string | null;
}

const BAR_WIDTH = 20;

/** The live TTY view: a header line, then one line per backend with a progress bar. */
export function waitFrame(status: FleetStatus | null, opts: FrameOptions): string[] {
  const max = Math.max(20, opts.width - 1);
  const limit = opts.timeoutMs === null ? '' : ` of ${shortDuration(opts.timeoutMs / 1000)}`;
  const want = opts.target === 'all' ? '' : ` for ${opts.target} ready`;
  const head = `waited ${shortDuration(opts.elapsedMs / 1000)}${limit}${want}`;
  if (status === null) return [truncate(`${head} · ${opts.error ?? 'connecting'}`, max)];
  const lines = [truncate(`${head} · ${summaryLine(status)}`, max)];
  if (opts.error !== null) lines.push(truncate(`  (latest poll failed: ${opts.error})`, max));
  const nameWidth = Math.max(4, ...status.backends.map((b) => b.name.length));
  const stateWidth = 9;
  for (const b of status.backends) {
    const name = b.name.padEnd(nameWidth);
    const state = b.state === 'starting' && b.reason === 'stalled' ? 'stalled' : b.state;
    const detail = b.state === 'failed' || b.state === 'unhealthy' ? (b.reason ?? '') : progressText(b);
    const prefix = `${name}  ${state.padEnd(stateWidth)}  ${progressBar(ratioOf(b), BAR_WIDTH)}  `;
    const room = max - prefix.length;
    const text = room > 0 ? truncate(detail === '-' ? '' : detail, room) : '';
    const plain = `${prefix}${text}`.trimEnd();
    if (prefix.length > max) {
      lines.push(truncate(plain, max));
      continue;
    }
    const painted = `${name}  ${paintState(state.padEnd(stateWidth), b, opts.color)}  ${paintState(
      progressBar(ratioOf(b), BAR_WIDTH),
      b,
      opts.color,
    )}  ${text}`;
    lines.push(painted.trimEnd());
  }
  return lines;
}
