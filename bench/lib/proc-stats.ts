/**
 * CPU time and peak memory of a process tree from /proc: `stat` fields 14-15 (utime, stime, in
 * clock ticks, CLK_TCK = 100 on Linux) and `status` VmHWM (peak resident set). A tree because
 * nginx forks its worker; node and haproxy are one process (all threads count in the process line).
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';

const CLK_TCK = 100;

function statFields(pid: number): string[] | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces; everything after its closing ')' splits cleanly.
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/** Every live descendant of `pid` (children, grandchildren, ...). */
export function descendants(pid: number): number[] {
  const parent = new Map<number, number>();
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  for (const entry of entries) {
    const p = Number(entry);
    if (!Number.isInteger(p)) continue;
    const fields = statFields(p);
    // After ')': state, ppid, ...
    if (fields) parent.set(p, Number(fields[1]));
  }
  const out: number[] = [];
  const frontier = [pid];
  while (frontier.length > 0) {
    const current = frontier.pop() as number;
    for (const [child, ppid] of parent) {
      if (ppid === current) {
        out.push(child);
        frontier.push(child);
      }
    }
  }
  return out;
}

/** User + system CPU seconds of one process (all its threads). */
export function processCpuSeconds(pid: number): number {
  const fields = statFields(pid);
  if (!fields) return 0;
  // utime and stime are fields 14 and 15 of the whole line, i.e. 12 and 13 after ')'.
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
}

/** CPU seconds of `pid` and its live descendants. */
function treeCpuSeconds(pid: number): number {
  let total = processCpuSeconds(pid);
  for (const child of descendants(pid)) total += processCpuSeconds(child);
  return total;
}

function statusKb(pid: number, key: string): number {
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text);
    return match ? Number(match[1]) : 0;
  } catch {
    return 0;
  }
}

/** Peak RSS (VmHWM) in bytes, summed over the tree. */
export function treePeakRssBytes(pid: number): number {
  let kb = statusKb(pid, 'VmHWM');
  for (const child of descendants(pid)) kb += statusKb(child, 'VmHWM');
  return kb * 1024;
}

/** Current RSS in bytes, summed over the tree. */
export function treeRssBytes(pid: number): number {
  let kb = statusKb(pid, 'VmRSS');
  for (const child of descendants(pid)) kb += statusKb(child, 'VmRSS');
  return kb * 1024;
}

/** Resets VmHWM to the current RSS (`echo 5 > clear_refs`, Linux >= 4.0); false where not allowed. */
export function resetPeakRss(pid: number): boolean {
  let ok = true;
  for (const p of [pid, ...descendants(pid)]) {
    try {
      writeFileSync(`/proc/${p}/clear_refs`, '5');
    } catch {
      ok = false;
    }
  }
  return ok;
}

/** A CPU-time meter over a measured phase. */
export class CpuMeter {
  #pid: number;
  #start: number;
  constructor(pid: number) {
    this.#pid = pid;
    this.#start = treeCpuSeconds(pid);
  }
  seconds(): number {
    return treeCpuSeconds(this.#pid) - this.#start;
  }
}

/** Busy ticks (everything but idle and iowait) of all CPUs together, from /proc/stat. */
export function systemBusySeconds(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0];
  const [, user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).map(Number);
  return (user + nice + system + irq + softirq + steal) / CLK_TCK;
}

/**
 * Waits until the machine is quiet (other sessions may be compiling or testing): busy below
 * `maxCores` over a 300 ms sample, for at most `timeoutMs`. Returns the last busy figure (cores).
 */
export async function waitQuiet(maxCores = 0.15, timeoutMs = 20_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const before = systemBusySeconds();
    await new Promise((resolve) => setTimeout(resolve, 300));
    const busy = (systemBusySeconds() - before) / 0.3;
    if (busy <= maxCores || Date.now() > deadline) return busy;
  }
}
