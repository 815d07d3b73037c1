/**
 * A request's traits for admission, from its headers: its priority class is the one named by
 * `X-Fleetgate-Priority`, else the class its API key belongs to (`queue.classes[].api_keys`), else
 * `queue.default_class`. The lookups are built once from the config.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Config } from '../config/types.js';
import { bearerToken } from '../http/bearer-keys.js';
import type { RequestTraits } from '../routing/request-traits.js';

const PRIORITY_HEADER = 'x-fleetgate-priority';

/** The request's traits, or why its class is not acceptable (for a 400). */
type TraitsResult = { traits: RequestTraits; problem: null } | { traits: null; problem: string };

export type TraitsReader = (headers: IncomingHttpHeaders) => TraitsResult;

export function createTraitsReader(queue: Config['queue']): TraitsReader {
  const names = new Set(queue.classes.map((cls) => cls.name));
  const known = queue.classes.map((cls) => cls.name).join(', ');
  const classOfKey = new Map<string, string>();
  for (const cls of queue.classes) for (const key of cls.api_keys) classOfKey.set(key, cls.name);

  return (headers) => {
    const apiKey = bearerToken(headers.authorization);
    const named = headers[PRIORITY_HEADER];
    if (named === undefined) {
      const priority = (apiKey !== null && classOfKey.get(apiKey)) || queue.default_class;
      return { traits: { priority, apiKey }, problem: null };
    }
    const priority = (Array.isArray(named) ? named[0] : named).trim();
    if (!names.has(priority)) {
      const problem = `unknown priority class ${JSON.stringify(priority)} in X-Fleetgate-Priority (known classes: ${known})`;
      return { traits: null, problem };
    }
    return { traits: { priority, apiKey }, problem: null };
  };
}
