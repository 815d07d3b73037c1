/**
 * `queue.classes[].backend_priority`: the request's class also orders the backend's own queue. SGLang
 * started with `--enable-priority-scheduling` sorts its waiting queue by each request's `priority`
 * (larger first unless `--schedule-low-priority-values-first`), then by arrival; without it the
 * field is ignored (sgl-project/sglang#8746, `schedule_policy.py` `_sort_by_priority_and_fcfs`).
 * fleetgate's queue orders only what has not been dispatched yet; a request dispatched to a backend
 * whose queue holds batch requests waits behind them first come first served, unless the backend
 * knows its priority. The class's value replaces any `priority` the client sent: the class decides.
 */
import type { PriorityClassConfig } from '../config/types.js';
import { generationApiOf } from '../routing/openai-request.js';

/**
 * The body to send upstream for a request of `className` to `path`, given its JSON (parsed on first
 * call: request-context-from.ts `BodyJson`): the object with the class's `priority`, or null to send
 * the body as received.
 */
export type PriorityStamp = (path: string, className: string, json: () => unknown) => Record<string, unknown> | null;

/** A stamp for the classes that set `backend_priority`; undefined when none does (bodies go as they are). */
export function createPriorityStamp(classes: readonly PriorityClassConfig[]): PriorityStamp | undefined {
  const values = new Map<string, number>();
  for (const cls of classes) if (cls.backend_priority !== null) values.set(cls.name, cls.backend_priority);
  if (values.size === 0) return undefined;
  return (path, className, json) => {
    const value = values.get(className);
    if (value === undefined) return null;
    // SGLang takes a `priority` on its native and OpenAI generation endpoints.
    return generationApiOf(path) !== null ? withPriority(json(), value) : null;
  };
}

/**
 * A copy of the JSON object `json` with `priority` set; null for any other body (not JSON, an array:
 * it goes as received and the backend answers it). The parsed body itself is left as it was.
 */
export function withPriority(json: unknown, priority: number): Record<string, unknown> | null {
  if (json === null || typeof json !== 'object' || Array.isArray(json)) return null;
  return { ...(json as Record<string, unknown>), priority };
}
