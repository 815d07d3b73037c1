/**
 * `launch.command` and its sibling templates: split into an argument list as a shell splits words, but
 * never run through one (no `$VAR`, globs, pipes or redirections), with named `{placeholders}`.
 */

/** What a launch template may name; `{log}` and `{gpus}` only where they are already known. */
export const LAUNCH_PLACEHOLDERS = ['i', 'port', 'host', 'name', 'gpus', 'log'] as const;
export type LaunchPlaceholder = (typeof LAUNCH_PLACEHOLDERS)[number];

/**
 * Words separated by whitespace; `'...'` keeps everything literally, `"..."` too except `\"` and `\\`.
 * Returns a problem (unclosed quote) as a string instead of throwing, for the config to name the key.
 */
export function splitCommand(text: string): string[] | string {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote === "'") {
      if (c === "'") quote = null;
      else word += c;
    } else if (quote === '"') {
      if (c === '"') quote = null;
      else if (c === '\\' && (text[i + 1] === '"' || text[i + 1] === '\\')) word += text[++i];
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (quote !== null) return `unclosed ${quote} quote`;
  if (inWord) words.push(word);
  return words;
}

/** The names inside `{...}` in `text`, in order. */
function placeholdersIn(text: string): string[] {
  return [...text.matchAll(/\{([^{}]*)\}/g)].map((match) => match[1]);
}

/** The first placeholder of `text` not in `allowed`, or null. */
export function unknownPlaceholder(text: string, allowed: readonly string[]): string | null {
  return placeholdersIn(text).find((name) => !allowed.includes(name)) ?? null;
}

export function fillPlaceholders(text: string, values: Readonly<Partial<Record<LaunchPlaceholder, string>>>): string {
  return text.replace(/\{([^{}]*)\}/g, (whole, name: string) => values[name as LaunchPlaceholder] ?? whole);
}
