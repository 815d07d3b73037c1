/**
 * The one test for a JSON object (a mapping: not null, not an array), before its fields are read:
 * a config section, a request body, a batch input line, an admin call's query. It lives in config/
 * because config/ is the lowest layer every other layer may import (.dependency-cruiser.cjs), and
 * the config's own validation is its first reader.
 */

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
