/** config/examples/hardened.yaml loads and sets what it promises. */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadConfig } from '../../src/config/index.js';

test('the hardened example loads with keys, token from the environment, and explicit limits', () => {
  const { config } = loadConfig({
    cwd: join(import.meta.dirname, '../..'),
    argv: ['--config', 'config/examples/hardened.yaml'],
    env: { FLEETGATE_ADMIN_TOKEN: 'from-env' },
  });
  assert.deepEqual(config.auth.api_keys, ['change-me-team-a', 'change-me-team-b']);
  assert.equal(config.upstream.api_key, 'change-me-backend');
  assert.equal(config.admin.token, 'from-env');
  assert.equal(config.backends.length, 7);
  assert.equal(config.limits.body_size, 32 * 2 ** 20);
  assert.equal(config.limits.headers_timeout, 10_000);
  assert.equal(config.limits.max_connections, 4096);
  assert.equal(config.upstream.stream_idle_timeout, 120_000);
});
