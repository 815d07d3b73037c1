/** Polls `check` until it returns a truthy value or `timeoutMs` passes; never a fixed sleep. */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  { timeoutMs = 10_000, intervalMs = 20, what = 'condition' } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Resolves with the first emitted value of `event`, or rejects after `timeoutMs`. */
export function once<T = unknown>(
  emitter: {
    once(event: string, fn: (value: T) => void): unknown;
    off(event: string, fn: (value: T) => void): unknown;
  },
  event: string,
  timeoutMs = 10_000,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      emitter.off(event, onEvent);
      reject(new Error(`timed out after ${timeoutMs} ms waiting for '${event}'`));
    }, timeoutMs);
    function onEvent(value: T) {
      clearTimeout(timer);
      resolve(value);
    }
    emitter.once(event, onEvent);
  });
}
