/** `queue.classes[].backend_priority`: the class's value in the body sent upstream, and its config rule. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { validateConfig } from '../../src/config/validate.js';
import { createPriorityStamp, withPriority } from '../../src/proxy/backend-priority.js';
import { jsonOnce } from '../../src/proxy/request-context-from.js';

const cls = (name: string, backend_priority: number | null) => ({
  name,
  max_waiting: null,
  timeout: null,
  api_keys: [],
  backend_priority,
});

test("the class's priority is set in a generation request's JSON body, replacing the client's", () => {
  const stamp = createPriorityStamp([cls('interactive', 1), cls('batch', 0)]);
  assert.ok(stamp);
  const json = jsonOnce(Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], priority: 99 })));
  const sent = stamp('/v1/chat/completions', 'interactive', json);
  assert.deepEqual(sent, { messages: [{ role: 'user', content: 'hi' }], priority: 1 });
  assert.equal((json() as { priority: number }).priority, 99, 'the parsed body is shared, so it is not changed');
  assert.equal(stamp('/generate?x=1', 'batch', jsonOnce(Buffer.from('{"text":"a"}')))?.priority, 0);
});

test('other paths, bodies that are not a JSON object, and missing bodies go as received (null)', () => {
  const stamp = createPriorityStamp([cls('interactive', 1), cls('batch', 0)]);
  assert.ok(stamp);
  assert.equal(stamp('/abort_request', 'batch', jsonOnce(Buffer.from('{"rid":"r1"}'))), null);
  assert.equal(stamp('/generate', 'batch', jsonOnce(Buffer.from('{"text": '))), null);
  assert.equal(withPriority([1, 2], 3), null);
  assert.equal(stamp('/generate', 'batch', jsonOnce(null)), null);
});

test('no class sets backend_priority: no stamp, bodies are forwarded byte for byte', () => {
  assert.equal(createPriorityStamp([cls('interactive', null), cls('batch', null)]), undefined);
});

test('backend_priority on some classes only is refused, naming the class without one', () => {
  assert.throws(
    () =>
      validateConfig(
        {
          backends: ['http://127.0.0.1:30000'],
          queue: { classes: [{ name: 'interactive', backend_priority: 1 }, 'batch'] },
        },
        'test.yaml',
      ),
    (error: Error) => /queue\.classes\[1\]\.backend_priority/.test(error.message) && /every class/.test(error.message),
  );
  const config = validateConfig(
    {
      backends: ['http://127.0.0.1:30000'],
      queue: {
        classes: [
          { name: 'interactive', backend_priority: 1 },
          { name: 'batch', backend_priority: 0 },
        ],
      },
    },
    'test.yaml',
  );
  assert.deepEqual(
    config.queue.classes.map((c) => c.backend_priority),
    [1, 0],
  );
});
