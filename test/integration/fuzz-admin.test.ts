/**
 * Generated calls to the admin surface (`/fleet/*`): methods, paths with generated backend names,
 * bodies, `Authorization` values and forwarding headers. Without `admin.token`, from a non-loopback
 * peer, and with a token set, without it or with a wrong one, no mutation is ever accepted: never a
 * 2xx from fleetgate, and the fleet (its backends, their states and URLs) is the same afterwards.
 *
 * The non-loopback peer is stated with `app.inject({ remoteAddress })`, as admin-auth.test.ts does
 * where the machine has no second interface; where it has one, a real-socket batch runs from it too.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Pool } from 'undici';
import type { Gateway } from '../../src/app.js';
import { startReadyFleet } from '../helpers/fleet.js';
import { type Answer, assertProperty, contractBreach, fromBackend } from '../helpers/fuzz-inputs.js';
import { nonLoopbackAddress } from '../helpers/net.js';

const TOKEN = 'fuzz-admin-token-0123456789';
const BATCH = 20;

const name = fc.oneof(
  fc.constantFrom('gpu0', 'gpu1', 'gpu9', '127.0.0.1:9'),
  fc.stringMatching(/^[A-Za-z0-9._~:-]{1,16}$/),
);

const adminPath = fc.oneof(
  fc.constantFrom('/fleet/backends', '/fleet/reload', '/fleet/status', '/fleet/backends/'),
  name.map((n) => `/fleet/backends/${n}`),
  fc
    .tuple(name, fc.constantFrom('drain', 'resume', 'restart', 'undrain', 'x'))
    .map(([n, verb]) => `/fleet/backends/${n}/${verb}`),
);

const mutation = fc.constantFrom('POST', 'DELETE', 'PUT', 'PATCH');

const authorization = fc.option(
  fc.oneof(
    fc.constantFrom(
      'Bearer',
      'Bearer ',
      `Bearer ${TOKEN.slice(0, -1)}`,
      `Bearer ${TOKEN}x`,
      `bearer ${TOKEN.toUpperCase()}`,
      `Basic ${Buffer.from(`admin:${TOKEN}`).toString('base64')}`,
      `Token ${TOKEN}`,
    ),
    fc.stringMatching(/^[\x21-\x7e ]{0,40}$/).map((s) => `Bearer ${s}`),
  ),
  { nil: undefined },
);

const body = fc.option(
  fc.oneof(
    fc.record({ url: fc.constantFrom('http://127.0.0.1:9', 'http://10.0.0.1:30000', 'x'), name: fc.option(name) }),
    fc.jsonValue({ maxDepth: 2 }),
  ),
  { nil: undefined },
);

const adminCase = fc.record({
  method: mutation,
  path: adminPath,
  authorization,
  forwardedFor: fc.option(fc.constantFrom('127.0.0.1', '::1', 'localhost'), { nil: undefined }),
  body,
  from: fc
    .oneof(
      fc.ipV4(),
      fc.ipV6(),
      fc.ipV4().map((ip) => `::ffff:${ip}`),
    )
    .filter((ip) => !isLoopbackText(ip)),
});
type AdminCase = typeof adminCase extends fc.Arbitrary<infer T> ? T : never;

function isLoopbackText(ip: string): boolean {
  const v4 = ip.startsWith('::ffff:') ? ip.slice(7) : ip;
  return v4.startsWith('127.') || ip === '::1' || /^(0+:){7}0*1$/.test(ip);
}

function headersOf(c: AdminCase): Record<string, string> {
  const headers: Record<string, string> = {};
  if (c.authorization !== undefined) headers.authorization = c.authorization;
  if (c.forwardedFor !== undefined) {
    headers['x-forwarded-for'] = c.forwardedFor;
    headers['x-real-ip'] = c.forwardedFor;
  }
  if (c.body !== undefined) headers['content-type'] = 'application/json';
  return headers;
}

/** What a refused mutation must leave unchanged. */
function fleetShape(gateway: Gateway): string {
  return JSON.stringify(gateway.fleet.registry.list().map((b) => [b.name, b.url, b.state]));
}

function judge(c: AdminCase, answer: Answer): void {
  const what = `${c.method} ${c.path} from ${c.from} auth=${c.authorization} xff=${c.forwardedFor}`;
  assert.ok(
    fromBackend(answer) || answer.status >= 400,
    `${what}: a mutation was accepted (${answer.status} ${answer.body.slice(0, 200)})`,
  );
  assert.equal(contractBreach(answer, c.method), null, what);
}

/** Generated batches over TCP; every answer judged, the fleet unchanged after each batch. */
async function sendBatches(pool: Pool, gateway: Gateway, before: string, numRuns: number): Promise<number> {
  let cases = 0;
  await assertProperty(
    fc.asyncProperty(fc.array(adminCase, { minLength: BATCH, maxLength: BATCH }), async (batch) => {
      const answers = await Promise.all(
        batch.map(async (c) => {
          const res = await pool.request({
            method: c.method as 'POST',
            path: c.path,
            headers: headersOf(c),
            body: c.body === undefined ? undefined : JSON.stringify(c.body),
          });
          return { status: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() };
        }),
      );
      cases += batch.length;
      for (const [i, answer] of answers.entries()) judge(batch[i], answer);
      assert.equal(fleetShape(gateway), before, 'no refused call changed the fleet');
    }),
    { numRuns, endOnFailure: true },
  );
  return cases;
}

test('fuzz: no mutating admin call is accepted from a non-loopback peer without admin.token', async (t) => {
  const { gateway } = await startReadyFleet(t, [{}, {}]);
  const before = fleetShape(gateway);
  let cases = 0;
  await assertProperty(
    fc.asyncProperty(fc.array(adminCase, { minLength: BATCH, maxLength: BATCH }), async (batch) => {
      for (const c of batch) {
        const res = await gateway.app.inject({
          method: c.method as 'POST',
          url: c.path,
          remoteAddress: c.from,
          headers: headersOf(c),
          payload: c.body === undefined ? undefined : JSON.stringify(c.body),
        });
        cases++;
        judge(c, { status: res.statusCode, headers: res.headers as Answer['headers'], body: res.body });
        assert.equal(fleetShape(gateway), before, `${c.method} ${c.path} from ${c.from} changed the fleet`);
      }
    }),
    { numRuns: 75, endOnFailure: true },
  );

  t.diagnostic(`${cases} generated admin calls from non-loopback peers (stated)`);
});

test('fuzz: over a real socket from a non-loopback address, no mutation is accepted without admin.token', async (t) => {
  const v4 = nonLoopbackAddress('IPv4');
  if (v4 === null) {
    t.skip('no non-loopback IPv4 address on this machine (the stated-peer case above covers the decision)');
    return;
  }
  // Listening on that one address only (not on every interface), connecting from it.
  const { gateway, url } = await startReadyFleet(t, [{}, {}], { listen: `${v4}:0` });
  const pool = new Pool(url, { connections: 6, connect: { localAddress: v4 } });
  t.after(() => pool.close());
  const before = fleetShape(gateway);
  const cases = await sendBatches(pool, gateway, before, 25);
  t.diagnostic(`${cases} generated admin calls from ${v4} over TCP`);
});

test('fuzz: with admin.token, no mutation is accepted over TCP without the right token, even from loopback', async (t) => {
  const { gateway, url } = await startReadyFleet(t, [{}, {}], { admin: { token: TOKEN } });
  const pool = new Pool(url, { connections: 6 });
  t.after(() => pool.close());
  const before = fleetShape(gateway);
  const cases = await sendBatches(pool, gateway, before, 50);
  t.diagnostic(`${cases} generated admin calls with a missing or wrong token`);
});
