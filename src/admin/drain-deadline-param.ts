/**
 * A drain call's own deadline (`POST /fleet/backends/:name/drain`, `DELETE /fleet/backends/:name`):
 * `?deadline=10s` or the JSON body `{"deadline": "10s"}`, a duration as in the config (`0` = no
 * deadline); absent, `health.drain_deadline` applies. Read with the config's own duration rule, so
 * a bad value gets the message a bad `health.drain_deadline` would.
 */
import { ConfigError, describeValue } from '../config/errors.js';
import { isObject } from '../config/json-object.js';
import { duration } from '../config/rules.js';

const KEY = 'deadline';
const rule = duration(undefined);

/** ms (0 = none), null when the call gives none, or the 400's message. */
export type DeadlineParam = { ok: true; ms: number | null } | { ok: false; message: string };

export function deadlineParam(query: unknown, body: unknown): DeadlineParam {
  const inQuery = isObject(query) ? query[KEY] : undefined;
  let inBody: unknown;
  if (body !== undefined && body !== null) {
    if (!isObject(body))
      return refuse(`the body must be a JSON object such as {"deadline": "10s"}, got ${describeValue(body)}`);
    const unknown = Object.keys(body).filter((key) => key !== KEY);
    if (unknown.length > 0) return refuse(`unknown key "${unknown[0]}" in the body (the one key is "deadline")`);
    inBody = body[KEY];
  }
  if (inQuery !== undefined && inBody !== undefined)
    return refuse('give the deadline once: in the query or in the body');
  const value = inQuery ?? inBody;
  if (value === undefined) return { ok: true, ms: null };
  try {
    return { ok: true, ms: rule.parse(value, KEY) };
  } catch (error) {
    if (error instanceof ConfigError) return refuse(`${error.message}; 0 = no deadline`);
    throw error;
  }
}

function refuse(message: string): DeadlineParam {
  return { ok: false, message };
}
