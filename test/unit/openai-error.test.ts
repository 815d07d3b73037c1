import assert from 'node:assert/strict';
import { test } from 'node:test';
import { errorBody, errorTypeFor } from '../../src/http/openai-error.js';

test('status to type: a backend 504 is upstream_timeout, other 502s upstream_error, a 500 internal_error', () => {
  assert.equal(errorTypeFor(504), 'upstream_timeout');
  assert.equal(errorTypeFor(502), 'upstream_error');
  assert.equal(errorTypeFor(500), 'internal_error');
  assert.equal(errorTypeFor(501), 'internal_error');
  assert.equal(errorTypeFor(503), 'fleet_unavailable');
  assert.equal(errorTypeFor(429), 'rate_limit_exceeded', 'one type for every 429: rate_limit and a full class alike');
  assert.equal(errorTypeFor(401), 'authentication_error');
  assert.equal(errorTypeFor(403), 'permission_error');
  assert.equal(errorTypeFor(404), 'not_found_error');
  assert.equal(errorTypeFor(409), 'conflict_error');
  assert.equal(errorTypeFor(400), 'invalid_request_error');
  assert.equal(errorTypeFor(413), 'invalid_request_error');
});

test('the body is the OpenAI shape clients parse', () => {
  assert.deepEqual(JSON.parse(errorBody('no', 'upstream_timeout', 504)), {
    error: { message: 'no', type: 'upstream_timeout', code: 504 },
  });
});
