/**
 * Generated input against fleetgate's HTTP surface over real TCP, with simulated engines behind it:
 * request bodies with every OpenAI field valid or of a wrong type, malformed JSON, invalid UTF-8,
 * unknown models, generated paths, methods and headers, huge and deeply nested bodies, oversized
 * headers and slowly sent bodies. Every answer is a backend's own answer relayed or a clear
 * OpenAI-shaped error from fleetgate (`contractBreach`), never a fleetgate 5xx, never a hang, and the
 * process stays up. Each fast-check run sends a batch of cases at once, so that ten thousand cases fit
 * in about a minute on a busy machine; the case count is asserted.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Pool } from 'undici';
import { startReadyFleet } from '../helpers/fleet.js';
import {
  type Answer,
  assertProperty,
  chatBody,
  contractBreach,
  extraHeaders,
  MODEL,
  method,
  PUBLIC_PATHS,
  rawBody,
} from '../helpers/fuzz-inputs.js';
import { openSocket, rawExchange } from '../helpers/raw-client.js';

const BATCH = 20;
const BODY_LIMIT = 256 * 1024;
const HEADER_LIMIT = 16 * 1024;
/** A generated case that takes longer than this hangs (the sims answer in milliseconds). */
const CASE_TIMEOUT_MS = 20_000;

interface Case {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer | null;
}

async function send(pool: Pool, c: Case): Promise<Answer> {
  const res = await pool.request({
    method: c.method as 'POST',
    path: c.path,
    headers: c.headers,
    body: c.body ?? undefined,
    headersTimeout: CASE_TIMEOUT_MS,
    bodyTimeout: CASE_TIMEOUT_MS,
  });
  const body = await res.body.text();
  return { status: res.statusCode, headers: res.headers as Answer['headers'], body };
}

/** Sends the batch at once and fails on the first answer that breaks the contract. */
async function judgeBatch(pool: Pool, cases: Case[], counted: { n: number }): Promise<void> {
  const answers = await Promise.all(
    cases.map((c) =>
      send(pool, c).catch((error: Error) => ({ status: 0, headers: {}, body: `no answer: ${error.message}` })),
    ),
  );
  counted.n += cases.length;
  answers.forEach((answer, i) => {
    const c = cases[i];
    const what = `${c.method} ${c.path} ${JSON.stringify(c.headers)} ${c.body?.toString('latin1').slice(0, 300)}`;
    assert.notEqual(answer.status, 0, `${what}: ${answer.body}`);
    const breach = contractBreach(answer, c.method);
    assert.equal(breach, null, `${what}: ${breach}`);
  });
}

const path = fc.oneof(
  { weight: 5, arbitrary: fc.constantFrom(...PUBLIC_PATHS) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(
        fc.constantFrom('/v1/', '/', '/fleet/', '/generate/', '/v1/chat/'),
        fc.stringMatching(/^[A-Za-z0-9%._~\-/]{0,30}$/),
        fc.option(fc.stringMatching(/^[A-Za-z0-9=&%._~-]{0,20}$/), { nil: undefined }),
      )
      .map(([head, tail, query]) => `${head}${tail}${query === undefined ? '' : `?${query}`}`)
      // /fleet/events is a long-lived event stream, not a request with an end.
      .filter((p) => !p.startsWith('/fleet/events')),
  },
);

const publicCase: fc.Arbitrary<Case> = fc
  .record({ method, path, headers: extraHeaders, body: rawBody, json: fc.boolean() })
  .map(({ method, path, headers, body, json }) => ({
    method,
    path,
    headers: json ? { 'content-type': 'application/json', ...headers } : headers,
    body: method === 'GET' || method === 'HEAD' ? null : body,
  }));

/** Mostly well-formed OpenAI requests to the generation routes, every field perhaps of a wrong type. */
const openAiCase: fc.Arbitrary<Case> = fc
  .tuple(fc.constantFrom('/v1/chat/completions', '/v1/completions', '/generate'), rawBody)
  .map(([path, body]) => ({ method: 'POST', path, headers: { 'content-type': 'application/json' }, body }));

test('fuzz: generated requests to the public surface get a relayed answer or a clear 4xx, never a fleetgate 5xx', async (t) => {
  const { url } = await startReadyFleet(t, [{}, {}], {
    limits: { body_size: `${BODY_LIMIT}B`, header_size: `${HEADER_LIMIT}B` },
    queue: { timeout: '10s' },
  });
  const pool = new Pool(url, { connections: 8, pipelining: 1 });
  t.after(() => pool.close());
  const counted = { n: 0 };
  const started = performance.now();

  await assertProperty(
    fc.asyncProperty(fc.array(openAiCase, { minLength: BATCH, maxLength: BATCH }), (cases) =>
      judgeBatch(pool, cases, counted),
    ),
    { numRuns: 200, endOnFailure: true },
  );
  await assertProperty(
    fc.asyncProperty(fc.array(publicCase, { minLength: BATCH, maxLength: BATCH }), (cases) =>
      judgeBatch(pool, cases, counted),
    ),
    { numRuns: 100, endOnFailure: true },
  );
  t.diagnostic(`${counted.n} generated public cases in ${Math.round(performance.now() - started)} ms`);
  assert.ok(counted.n >= 6_000, `${counted.n} cases`);
  assert.equal((await fetch(`${url}/livez`)).status, 200, 'fleetgate is still up');
});

test('fuzz: huge, deeply nested and oversized requests get 413 / 431 / a clear answer', async (t) => {
  const { url } = await startReadyFleet(t, [{}], {
    limits: { body_size: `${BODY_LIMIT}B`, header_size: `${HEADER_LIMIT}B` },
  });
  const port = Number(new URL(url).port);
  const pool = new Pool(url, { connections: 4 });
  t.after(() => pool.close());
  let cases = 0;

  // Sizes around the body limit: under it proxied (or refused by the engine), over it a 413 of fleetgate's.
  await assertProperty(
    fc.asyncProperty(fc.integer({ min: BODY_LIMIT - 4096, max: BODY_LIMIT * 3 }), async (size) => {
      cases++;
      const prefix = `{"model":"${MODEL}","max_tokens":1,"messages":[{"role":"user","content":"`;
      const body = Buffer.from(`${prefix}${'x'.repeat(Math.max(0, size - prefix.length - 4))}"}]}`);
      const answer = await send(pool, {
        method: 'POST',
        path: '/v1/chat/completions',
        headers: { 'content-type': 'application/json' },
        body,
      }).catch((error: Error) => ({ status: 0, headers: {}, body: error.message }));
      if (body.length > BODY_LIMIT) assert.equal(answer.status, 413, `${body.length} bytes: ${answer.body}`);
      else assert.ok(answer.status !== 0, answer.body);
      assert.equal(contractBreach(answer, 'POST'), null);
    }),
    { numRuns: 40 },
  );

  // Deep nesting in every place fleetgate reads: messages, content, prompt, and at the top.
  await assertProperty(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 60_000 }),
      fc.constantFrom('content', 'messages', 'prompt', 'top', 'model', 'input_ids'),
      fc.constantFrom('[', '{"a":'),
      fc.constantFrom('/v1/chat/completions', '/v1/completions', '/generate'),
      async (depth, where, open, path) => {
        cases++;
        const close = open === '[' ? ']' : '}';
        const nest = `${open.repeat(depth)}1${close.repeat(depth)}`;
        const text =
          where === 'top'
            ? nest
            : where === 'messages'
              ? `{"model":"${MODEL}","max_tokens":1,"messages":${nest}}`
              : where === 'content'
                ? `{"model":"${MODEL}","max_tokens":1,"messages":[{"role":"user","content":${nest}}]}`
                : `{"model":"${MODEL}","max_tokens":1,"${where}":${nest}}`;
        const answer = await send(pool, {
          method: 'POST',
          path,
          headers: { 'content-type': 'application/json' },
          body: Buffer.from(text),
        });
        assert.equal(contractBreach(answer, 'POST'), null, `${path} ${where} depth ${depth}`);
      },
    ),
    { numRuns: 60 },
  );

  // Headers around the header limit, sent raw: over it a 431 of fleetgate's, on the socket.
  await assertProperty(
    fc.asyncProperty(fc.integer({ min: 100, max: HEADER_LIMIT * 4 }), fc.nat(20), async (size, count) => {
      cases++;
      const each = Math.max(1, Math.floor(size / (count + 1)));
      const lines = Array.from({ length: count + 1 }, (_, i) => `x-pad-${i}: ${'h'.repeat(each)}\r\n`).join('');
      const answer = await rawExchange(port, `GET /v1/models HTTP/1.1\r\nHost: x\r\n${lines}Connection: close\r\n\r\n`);
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer.data)?.[1]);
      assert.ok(status === 200 || status === 431, `${size} bytes of headers: ${answer.data.slice(0, 200)}`);
      if (status === 431) assert.match(answer.data, /"error":\{"message":"request headers too large"/);
    }),
    { numRuns: 40 },
  );
  t.diagnostic(`${cases} size and depth cases`);
  assert.equal((await fetch(`${url}/livez`)).status, 200, 'fleetgate is still up');
});

test('fuzz: bodies sent slowly, in generated pieces, get an answer that keeps the contract', async (t) => {
  const { url } = await startReadyFleet(t, [{}]);
  const port = Number(new URL(url).port);
  await assertProperty(
    fc.asyncProperty(
      fc.array(chatBody, { minLength: 6, maxLength: 6 }),
      fc.integer({ min: 2, max: 8 }),
      fc.integer({ min: 5, max: 60 }),
      async (bodies, pieces, gapMs) => {
        await Promise.all(
          bodies.map(async (b) => {
            const body = Buffer.from(JSON.stringify({ ...b, stream: false }));
            const socket = await openSocket(port);
            let data = '';
            socket.setEncoding('latin1');
            socket.on('data', (chunk: string) => {
              data += chunk;
            });
            const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
            socket.write(
              `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
                `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n`,
            );
            const step = Math.ceil(body.length / pieces);
            for (let at = 0; at < body.length; at += step) {
              socket.write(body.subarray(at, at + step));
              await new Promise((resolve) => setTimeout(resolve, gapMs));
            }
            await closed;
            const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1]);
            const headerEnd = data.indexOf('\r\n\r\n');
            const server = /\r\nserver: uvicorn\r\n/i.test(data.slice(0, headerEnd));
            const breach = contractBreach(
              { status, headers: server ? { server: 'uvicorn' } : {}, body: data.slice(headerEnd + 4) },
              'POST',
            );
            assert.equal(breach, null, `${body.toString()}: ${data.slice(0, 300)}`);
          }),
        );
      },
    ),
    { numRuns: 8 },
  );
});

test('regression: a URL fastify cannot decode, and a generation that cannot fit the context, get clear 400s', async (t) => {
  const { url } = await startReadyFleet(t, [{}]);
  const pool = new Pool(url, { connections: 1 });
  t.after(() => pool.close());
  const badUrl = await send(pool, { method: 'OPTIONS', path: '/generate/J%-~/f', headers: {}, body: null });
  assert.equal(badUrl.status, 400);
  assert.equal(contractBreach(badUrl, 'OPTIONS'), null, badUrl.body);
  assert.match(badUrl.body, /"type":"invalid_request_error"/);

  // The simulated engine used to generate 10^124 tokens (a hang); SGLang refuses it.
  const huge = await send(pool, {
    method: 'POST',
    path: '/generate',
    headers: { 'content-type': 'application/json' },
    body: Buffer.from('{"text":"hi","sampling_params":{"max_new_tokens":9.5e+123}}'),
  });
  assert.equal(huge.status, 400, huge.body);
  assert.match(huge.body, /maximum context length/);
});
