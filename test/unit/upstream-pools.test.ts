/**
 * A request whose backend was removed while it waited finds no pool: the attempt must hear an error
 * through the callback it implements (`onError`), classified as a retryable closed connection, or
 * the request would wait for an answer that never comes.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Dispatcher } from 'undici';
import { FleetRegistry } from '../../src/fleet/registry.js';
import { classifyUpstreamError } from '../../src/routing/dispatch/upstream-failures.js';
import { UpstreamPools } from '../../src/routing/dispatch/upstream-pools.js';

test("dispatch to a removed backend calls the handler's onError with a retryable closed connection", async () => {
  const registry = new FleetRegistry({ rise: 1, fall: 3, stallAfter: 60_000, defaultCap: 0 });
  const backend = registry.add({ url: 'http://127.0.0.1:9', name: 'gone', kind: 'sglang', log: null });
  const pools = new UpstreamPools(registry, {
    connect_timeout: 1_000,
    headers_timeout: 1_000,
    stream_idle_timeout: 1_000,
    api_key: null,
    warm_up: false,
  });
  registry.remove('gone');
  const errors: Error[] = [];
  const handler = {
    onConnect: () => {},
    onHeaders: () => true,
    onData: () => true,
    onComplete: () => {},
    onError: (error: Error) => errors.push(error),
  } satisfies Dispatcher.DispatchHandler;
  pools.dispatch(backend, { method: 'GET', path: '/', headers: {}, body: null }, handler);
  assert.equal(errors.length, 1, 'onError was called once, at once');
  assert.equal((errors[0] as Error & { code?: string }).code, 'UND_ERR_CLOSED');
  assert.equal(classifyUpstreamError(errors[0]).retryable, true);
  await pools.close();
});
