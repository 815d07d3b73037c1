/**
 * Opt-in remedies (`launch.remedies`): the first whose `when` matches the failure reason changes flags of
 * the engine's next command line, e.g. `--mem-fraction-static` lowered by 0.05 after `Not enough memory`,
 * down to a floor. Pure.
 */
import type { LaunchRemedy, RemedyChange } from '../config/types.js';

export interface RemedyResult {
  argv: string[];
  /** What changed, e.g. `--mem-fraction-static 0.88 -> 0.83`; null when nothing did (no match, or at the floor). */
  applied: string | null;
}

export function applyRemedies(
  argv: readonly string[],
  reason: string,
  remedies: readonly LaunchRemedy[],
): RemedyResult {
  const remedy = remedies.find((candidate) => new RegExp(candidate.when).test(reason));
  if (remedy === undefined) return { argv: [...argv], applied: null };
  let next = [...argv];
  const changes: string[] = [];
  for (const [flag, change] of Object.entries(remedy.set)) {
    const current = flagValue(next, flag);
    const value = newValue(current, change);
    if (value === null || value === current) continue;
    next = withFlag(next, flag, value);
    changes.push(`${flag} ${current ?? '(unset)'} -> ${value}`);
  }
  return { argv: next, applied: changes.length === 0 ? null : changes.join(', ') };
}

function newValue(current: string | null, change: RemedyChange): string | null {
  if ('value' in change) return change.value;
  const number = Number(current);
  if (current === null || !Number.isFinite(number)) return null;
  let value = number + change.step;
  if (change.min !== null) value = Math.max(change.min, value);
  if (change.max !== null) value = Math.min(change.max, value);
  // 0.88 - 0.05 is 0.8300000000000001 in binary floating point.
  return String(Number(value.toFixed(decimals(current) + decimals(String(change.step)))));
}

function decimals(text: string): number {
  return text.split('.')[1]?.length ?? 0;
}

/** `--flag value` or `--flag=value`. */
export function flagValue(argv: readonly string[], flag: string): string | null {
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === flag) return argv[i + 1] ?? null;
    if (argv[i].startsWith(`${flag}=`)) return argv[i].slice(flag.length + 1);
  }
  return null;
}

function withFlag(argv: string[], flag: string, value: string): string[] {
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === flag && i + 1 < argv.length) return [...argv.slice(0, i + 1), value, ...argv.slice(i + 2)];
    if (argv[i].startsWith(`${flag}=`)) return [...argv.slice(0, i), `${flag}=${value}`, ...argv.slice(i + 1)];
  }
  return [...argv, flag, value];
}
