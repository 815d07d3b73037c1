/**
 * The one reader of `Authorization: Bearer <token>`: the scheme in any case (RFC 7235), so a client
 * writing `bearer` is the same client everywhere (its API key accepted, its priority class found,
 * its rate limit counted under its key), and anything else is no token at all.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { validateConfig } from '../../src/config/validate.js';
import { apiKeyCheck, bearerToken, hasValidKey, keyDigest } from '../../src/http/bearer-keys.js';
import { createTraitsReader } from '../../src/proxy/request-traits-from.js';

test('bearerToken reads the token whatever the scheme case, and nothing else', () => {
  for (const header of ['Bearer sk-1', 'bearer sk-1', 'BEARER sk-1', 'Bearer  sk-1', 'bearer\tsk-1 ']) {
    assert.equal(bearerToken(header), 'sk-1', JSON.stringify(header));
  }
  for (const header of [undefined, '', 'Bearer', 'Bearer ', 'Basic c2stMQ==', 'sk-1', 'Bearersk-1', 'Bearer a b']) {
    assert.equal(bearerToken(header), null, JSON.stringify(header));
  }
});

test('a lowercase bearer key is accepted, by hasValidKey and by the auth.api_keys check', () => {
  assert.equal(hasValidKey('bearer sk-1', [keyDigest('sk-1')]), true);
  assert.equal(hasValidKey('bearer sk-2', [keyDigest('sk-1')]), false);
  let keys: readonly string[] = ['sk-1'];
  const accepts = apiKeyCheck(() => keys);
  assert.equal(accepts('bearer sk-1'), true);
  assert.equal(accepts(undefined), false);
  keys = [];
  assert.equal(accepts(undefined), true, 'no keys configured: every request passes; a reload applies at once');
});

test('the check takes an extra token (the admin token) only while keys are set, and follows its reload', () => {
  let keys: readonly string[] = ['sk-1'];
  let token: string | null = 'admin-1';
  const accepts = apiKeyCheck(
    () => keys,
    () => token,
  );
  assert.equal(accepts('Bearer admin-1'), true);
  assert.equal(accepts('Bearer sk-1'), true);
  assert.equal(accepts('Bearer other'), false);
  token = 'admin-2';
  assert.equal(accepts('Bearer admin-1'), false, 'the old token no longer passes');
  assert.equal(accepts('Bearer admin-2'), true);
  token = null;
  assert.equal(accepts('Bearer admin-2'), false);
  keys = [];
  token = 'admin-2';
  assert.equal(accepts(undefined), true, 'no keys: open, whatever the token');
});

test('a lowercase bearer key gets its priority class', () => {
  const config = validateConfig(
    {
      backends: ['http://127.0.0.1:30000'],
      queue: { classes: [{ name: 'interactive', api_keys: ['sk-app'] }, 'batch'] },
    },
    'test',
  );
  const read = createTraitsReader(config.queue);
  assert.deepEqual(read({ authorization: 'bearer sk-app' }).traits, { priority: 'interactive', apiKey: 'sk-app' });
  assert.deepEqual(read({ authorization: 'Bearer sk-other' }).traits, { priority: 'batch', apiKey: 'sk-other' });
});
