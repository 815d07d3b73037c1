/**
 * `fleetgate status`'s KV-events table (issue #55): each backend's KV-cache event stream as kv-aware
 * routes on it (live, stale after a gap no replay filled, off) and the blocks fleetgate's map holds
 * for it. Shown only once some backend's events are not off: a fleet without events reads as before.
 */
import type { BackendStatus } from '../admin/fleet-summary.js';

const HEADERS = ['NAME', 'KV EVENTS', 'BLOCKS'] as const;

/** The table with its title line, or null when every backend's events are off (or unknown). */
export function renderKvEvents(backends: readonly BackendStatus[]): string | null {
  if (!backends.some((b) => b.kv_events !== undefined && b.kv_events.state !== 'off')) return null;
  const rows = backends.map((b) => {
    const kv = b.kv_events ?? { state: 'off', blocks: 0 };
    return [b.name, kv.state, kv.state === 'off' ? '-' : kv.blocks.toLocaleString('en-US')];
  });
  const widths = HEADERS.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (i === 2 ? cell.padStart(widths[i]) : cell.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return ["KV-cache events (kv-aware routes on the live ones' blocks):", line(HEADERS), ...rows.map(line)].join('\n');
}
