/**
 * Every route of fleetgate's own that carries a body, walked from the one table `http/request-body.ts`
 * keeps as routes are registered (so a new route cannot be left out): a route that takes no body
 * answers alike with no body, an empty body under `content-type: application/json` (what the Python
 * `openai` SDK sends for `batches.cancel`) and `{}`; a route that needs one answers a bodyless POST
 * with a 400 naming what is missing. Over real sockets, against a gateway with admin token, API keys,
 * the Batch API and a reloadable config.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import pino from 'pino';
import { request } from 'undici';
import { createGateway } from '../../src/app.js';
import { routeBodies } from '../../src/http/request-body.js';
import { tempDir } from '../helpers/batch.js';
import { backendsFor, createSims } from '../helpers/fleet.js';
import { shippedConfig } from '../helpers/shipped.js';
import { waitFor } from '../helpers/wait.js';

const TOKEN = 'admin-secret';

interface Answer {
  status: number;
  message: string;
}

async function send(url: string, method: string, body: { type?: string; bytes?: string }): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` };
  if (body.type !== undefined) headers['content-type'] = body.type;
  const res = await request(url, {
    method: method as 'POST',
    headers,
    body: body.bytes,
  });
  const text = await res.body.text();
  let message = '';
  try {
    message = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? '';
  } catch {
    // Not JSON: no error message to read.
  }
  return { status: res.statusCode, message };
}

const BODIES = {
  none: {},
  'empty JSON': { type: 'application/json', bytes: '' },
  'empty JSON, charset': { type: 'application/json; charset=utf-8', bytes: '' },
  '{}': { type: 'application/json', bytes: '{}' },
} as const;

test('every body-less route takes no body, an empty JSON body and {}; every route needing one names it', async (t) => {
  const dir = tempDir(t);
  const sims = await createSims(
    t,
    [1, 2, 3, 4].map(() => ({ engine: { tokenMs: 20 } })),
  );
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady()));
  // As shipped (config/fleetgate.yaml), with the keys the routes need.
  const overrides = { admin: { token: TOKEN }, auth: { api_keys: ['sk-user'] }, batch: { dir: join(dir, 'batches') } };
  const configOf = () => shippedConfig('shipped', backendsFor(sims), overrides);
  const gateway = await createGateway(configOf(), { logger: pino({ level: 'silent' }), reloadConfig: configOf });
  const base = await gateway.listen();
  t.after(() => gateway.close());
  await waitFor(() => gateway.fleet.registry.ready.length === sims.length, { what: 'every backend ready' });

  const upload = async (text: string) => {
    const form = new FormData();
    form.append('purpose', 'batch');
    form.append('file', new Blob([text]), 'input.jsonl');
    const res = await fetch(`${base}/v1/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}` },
      body: form,
    });
    assert.equal(res.status, 200);
    return ((await res.json()) as { id: string }).id;
  };
  // Jobs to cancel, on an input slow enough (~1 s a request) to be running when cancelled.
  const lines = Array.from({ length: 50 }, (_, i) =>
    JSON.stringify({
      custom_id: `r${i}`,
      method: 'POST',
      url: '/v1/chat/completions',
      body: { model: 'default', max_tokens: 50, messages: [{ role: 'user', content: `q${i}` }] },
    }),
  );
  const input = await upload(`${lines.join('\n')}\n`);

  // Each body shape gets its own backend, batch job and file, so each finds its target as the first did.
  const shapes = Object.entries(BODIES);
  const targets = await Promise.all(
    shapes.map(async (_, i) => {
      const created = await request(`${base}/v1/batches`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ input_file_id: input, endpoint: '/v1/chat/completions', completion_window: '24h' }),
      });
      assert.equal(created.statusCode, 200);
      const batch = ((await created.body.json()) as { id: string }).id;
      return { name: sims[i].name, batch, file: await upload(`${lines[0]}\n`) };
    }),
  );
  /** The route's path with its parameters naming shape `i`'s own backend, job or file. */
  const pathOf = (url: string, i: number) =>
    url
      .replace(':name', targets[i].name)
      .replace(':id', url.startsWith('/v1/files/') ? targets[i].file : targets[i].batch);

  const table = routeBodies(gateway.app).filter((route) => !route.url.includes('*') && route.url !== '/');
  t.diagnostic(`routes with a body: ${table.map((r) => `${r.method} ${r.url}`).join(', ')}`);
  const listed = new Set(table.map((r) => `${r.method} ${r.url}`));
  for (const known of [
    'POST /v1/batches/:id/cancel',
    'POST /fleet/backends/:name/drain',
    'POST /fleet/backends/:name/resume',
    'POST /fleet/backends/:name/restart',
    'POST /fleet/reload',
    'DELETE /fleet/backends/:name',
    'DELETE /v1/files/:id',
    'POST /fleet/backends',
    'POST /v1/batches',
    'POST /v1/files',
  ]) {
    assert.ok(listed.has(known), `${known} is in the table`);
  }

  const bodyless = table.filter((route) => route.needs === null);
  const needing = table.filter((route) => route.needs !== null);
  // The destructive one last: a removed backend is not there for the next route.
  bodyless.sort((a, b) => Number(a.method === 'DELETE') - Number(b.method === 'DELETE'));
  for (const route of bodyless) {
    const answers: string[] = [];
    for (const [i, [shape, body]] of shapes.entries()) {
      const path = pathOf(route.url, i);
      const answer = await send(`${base}${path}`, route.method, body);
      answers.push(`${answer.status}`);
      const what = `${route.method} ${route.url} with ${shape}: ${answer.status} ${answer.message}`;
      assert.ok(answer.status < 400 || answer.status === 409, what);
      assert.doesNotMatch(answer.message, /body|JSON/i, what);
    }
    // Each shape meets its own target in the same state: the same answer for all of them.
    assert.equal(new Set(answers).size, 1, `${route.method} ${route.url}: ${answers.join(', ')}`);
    t.diagnostic(`${route.method} ${route.url}: ${answers.join(', ')} (${shapes.map(([s]) => s).join(', ')})`);
  }

  for (const route of needing) {
    const path = pathOf(route.url, 0);
    for (const shape of ['none', 'empty JSON'] as const) {
      const answer = await send(`${base}${path}`, route.method, BODIES[shape]);
      const what = `${route.method} ${route.url} with ${shape}: ${answer.status} ${answer.message}`;
      assert.equal(answer.status, 400, what);
      for (const field of route.needs?.fields ?? [])
        assert.ok(answer.message.includes(field), `${what} names ${field}`);
      t.diagnostic(what);
    }
  }
});
