/** Durations (`250ms`, `10s`, `1.5m`, `1h30m`) and sizes (`32MiB`, `100KB`, `1024`) as written in config values. */

const MS_PER_UNIT: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/** One `<number><unit>` term; `ms` comes first so that `10ms` is not read as 10 minutes and a stray `s`. */
const DURATION_TERM = /(\d+(?:\.\d+)?)(ms|s|m|h)/y;

/**
 * Milliseconds for a duration string such as `250ms`, `10s`, `1.5s`, `10m`, `1h` or `1h30m`, or null when
 * `value` is not one. A bare number is refused (is `30` seconds or milliseconds?) except 0, which is the
 * same in every unit.
 */
export function parseDuration(value: unknown): number | null {
  if (value === 0 || value === '0') return 0;
  if (typeof value !== 'string' || value === '') return null;
  let total = 0;
  for (let at = 0; at < value.length; at = DURATION_TERM.lastIndex) {
    DURATION_TERM.lastIndex = at;
    const term = DURATION_TERM.exec(value);
    if (term === null) return null;
    total += Number(term[1]) * MS_PER_UNIT[term[2]];
  }
  // 1.1s is 1100.0000000000002 in floating point; microseconds are precision enough.
  return Math.round(total * 1000) / 1000;
}

/** `10s`, `10m`, `1h`, `1.5s`, `250ms`: the largest unit that divides evenly, seconds with decimals otherwise. */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  for (const unit of ['h', 'm', 's'] as const) {
    if (ms % MS_PER_UNIT[unit] === 0) return `${ms / MS_PER_UNIT[unit]}${unit}`;
  }
  return ms >= 1000 ? `${Number((ms / 1000).toFixed(3))}s` : `${Number(ms.toFixed(3))}ms`;
}

const BYTES_PER_UNIT: Readonly<Record<string, number>> = {
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 2 ** 10,
  mib: 2 ** 20,
  gib: 2 ** 30,
  tib: 2 ** 40,
};

/**
 * Bytes for a size such as `32MiB`, `512KiB`, `1GiB` (powers of 1024), `100KB` (powers of 1000) or a plain
 * byte count (`1024` or `"1024"`), or null when `value` is not one. Units are case-insensitive.
 */
export function parseSize(value: unknown): number | null {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? value : null;
  if (typeof value !== 'string') return null;
  const match = /^(\d+(?:\.\d+)?) ?([a-z]*)$/i.exec(value.trim());
  if (match === null) return null;
  const unit = match[2].toLowerCase();
  const factor = unit === '' ? 1 : BYTES_PER_UNIT[unit];
  if (factor === undefined) return null;
  const bytes = Number(match[1]) * factor;
  if (unit === '' && !Number.isInteger(bytes)) return null;
  const rounded = Math.round(bytes);
  return Number.isSafeInteger(rounded) ? rounded : null;
}

/** `32MiB`, `64KiB`, `100KB` or `1000B`: the largest unit that divides evenly. */
export function formatSize(bytes: number): string {
  for (const unit of ['TiB', 'GiB', 'MiB', 'KiB', 'TB', 'GB', 'MB', 'KB'] as const) {
    const factor = BYTES_PER_UNIT[unit.toLowerCase()];
    if (bytes >= factor && bytes % factor === 0) return `${bytes / factor}${unit}`;
  }
  return `${bytes}B`;
}
