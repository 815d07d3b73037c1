/** The one error type of configuration, and the wording helpers its messages share. */

export class ConfigError extends Error {
  override name = 'ConfigError';

  /**
   * @param key the offending key path (`health.interval`, `backends[3].name`, `--lisen`), or '' for the whole
   *   config
   * @param problem what is wrong with it, without the key
   * @param source where the value came from, as a phrase: `in config/fleetgate.yaml:14`,
   *   `from --set routing.policy`, `from FLEETGATE_LISTEN`; null when unknown
   */
  constructor(
    readonly key: string,
    readonly problem: string,
    readonly source: string | null = null,
  ) {
    super(key === '' ? problem : `${key}: ${problem}`);
  }

  withSource(source: string | null): ConfigError {
    return new ConfigError(this.key, this.problem, source);
  }
}

/** A value as it should appear in a message: strings quoted, containers named rather than dumped. */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (value === null || value === undefined) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  return String(value);
}

/** `unknown key (did you mean "policy"?)`, or `unknown key (known keys: ...)` when nothing is close. */
export function unknownKeyProblem(word: string, candidates: readonly string[], what = 'key'): string {
  const suggestion = closestMatch(word, candidates);
  if (suggestion !== null) return `unknown ${what} (did you mean "${suggestion}"?)`;
  return `unknown ${what} (known: ${candidates.join(', ')})`;
}

/**
 * The candidate a typo most likely meant: the same word with `-` for `_` or other case, else the nearest
 * within an edit distance of 1 (words under 6 letters) or 2.
 */
function closestMatch(word: string, candidates: readonly string[]): string | null {
  const normal = (text: string) => text.toLowerCase().replaceAll('-', '_');
  const exact = candidates.find((candidate) => normal(candidate) === normal(word));
  if (exact !== undefined) return exact;
  const allowed = Math.min(2, Math.max(1, Math.floor(word.length / 3)));
  let best: string | null = null;
  let bestDistance = allowed + 1;
  for (const candidate of candidates) {
    const distance = editDistance(normal(word), normal(candidate));
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

/** Levenshtein distance where swapping two neighbouring letters (`polciy`) also counts as one edit. */
function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[][] = Array.from({ length: rows }, () => new Array<number>(cols).fill(0));
  for (let i = 0; i < rows; i++) d[i][0] = i;
  for (let j = 0; j < cols; j++) d[0][j] = j;
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.length][b.length];
}
