/** How a model name a client or the config gives matches the names a backend serves. */

/** Exact match, or the expected name is the path's last segments (`Llama-3.1-8B` for `/models/Llama-3.1-8B`). */
export function servesModel(served: ReadonlyArray<string | null>, expected: string): boolean {
  return served.some((name) => name !== null && (name === expected || name.endsWith(`/${expected}`)));
}

export function sameNames(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((name, i) => name === b[i]);
}
