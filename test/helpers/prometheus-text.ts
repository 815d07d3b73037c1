/** Reading Prometheus text exposition and the metric names that PromQL in our config files uses. */

export interface Exposition {
  /** Family name -> type, from `# TYPE` lines. */
  types: Map<string, string>;
  /** Names of the samples present (e.g. `x_bucket`, `x_sum`, `x_count` for a histogram `x`). */
  samples: Set<string>;
}

export function parseExposition(text: string): Exposition {
  const types = new Map<string, string>();
  const samples = new Set<string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) types.set(type[1], type[2]);
    else if (line !== '' && !line.startsWith('#')) samples.add(/^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)?.[0] ?? line);
  }
  return { types, samples };
}

/** Sample value of the series `name{labels}` with exactly these labels (order-free), or undefined. */
export function sampleValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const want = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .sort()
    .join(',');
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const have = (match[2] ?? '')
      .split(/,(?=[a-zA-Z_]+=")/)
      .filter(Boolean)
      .sort()
      .join(',');
    if (have === want) return Number(match[3]);
  }
  return undefined;
}

/** Metric names with `prefix` in PromQL expressions (or any text). */
export function metricNamesIn(text: string, prefixes: readonly string[]): Set<string> {
  const names = new Set<string>();
  const pattern = new RegExp(`\\b(?:${prefixes.join('|')})[a-zA-Z0-9_]*`, 'g');
  for (const match of text.matchAll(pattern)) names.add(match[0]);
  return names;
}

const HISTOGRAM_SUFFIXES = ['_bucket', '_sum', '_count'] as const;

/**
 * Why `name`, as written in a query, selects nothing from `exposition`; null if it selects samples.
 * `x_bucket`, `x_sum` and `x_count` are only valid for a histogram (or summary) family `x`.
 */
export function missingReason(name: string, exposition: Exposition): string | null {
  const suffix = HISTOGRAM_SUFFIXES.find((s) => name.endsWith(s));
  const family = suffix ? name.slice(0, -suffix.length) : name;
  const familyType = exposition.types.get(family);
  if (suffix && (familyType === 'histogram' || familyType === 'summary')) {
    return exposition.samples.has(name) ? null : `${name}: histogram ${family} has no ${suffix} samples yet`;
  }
  const type = exposition.types.get(name);
  if (type === undefined) return `${name}: no such metric family`;
  if (type === 'histogram' || type === 'summary') return `${name}: a ${type}, query its _bucket/_sum/_count series`;
  return exposition.samples.has(name) ? null : `${name}: declared (${type}) but has no samples`;
}
