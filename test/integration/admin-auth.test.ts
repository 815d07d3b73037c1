/**
 * Who may change the fleet. With `admin.token`: a bearer token (401 without or wrong). Without one:
 * loopback only (403 otherwise), judged by the TCP peer address, never by X-Forwarded-For.
 *
 * The non-loopback source is real: the gateway listens on all interfaces (dual-stack `[::]`) and the
 * test connects from this machine's own non-loopback address (from `os.networkInterfaces()`), so
 * the peer address fleetgate sees is that address. Where the machine has none, that case is
 * skipped and the `app.inject({ remoteAddress })` case below still covers the decision.
 */
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { test } from 'node:test';
import pino from 'pino';
import { isLoopback } from '../../src/admin/admin-auth.js';
import { createGateway } from '../../src/app.js';
import { validateConfig } from '../../src/config/validate.js';
import { nonLoopbackAddress } from '../helpers/net.js';

interface Logged {
  msg: string;
  admin?: { from?: string; action?: string; backend?: string };
}

async function startWithLogs(t: { after(fn: () => unknown): void }, raw: Record<string, unknown>) {
  const lines: Logged[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line) as Logged) });
  const config = validateConfig({ backends: ['http://127.0.0.1:9'], ...raw }, 'test');
  const gateway = await createGateway(config, { logger });
  await gateway.listen();
  t.after(() => gateway.close());
  const address = gateway.app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no address');
  return { gateway, port: address.port, lines };
}

interface Answer {
  status: number;
  body: string;
  headers: Record<string, unknown>;
}

/** POST over a real socket from `localAddress` to `host`. */
function post(
  host: string,
  port: number,
  path: string,
  opts: { localAddress?: string; headers?: Record<string, string> } = {},
) {
  return new Promise<Answer>((resolve, reject) => {
    const req = httpRequest(
      { host, port, path, method: 'POST', localAddress: opts.localAddress, headers: opts.headers },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

test('isLoopback: 127.0.0.0/8, ::1 and IPv4-mapped loopback; nothing else', () => {
  for (const address of ['127.0.0.1', '127.0.0.2', '127.255.255.254', '::1', '::ffff:127.0.0.1', '::ffff:127.1.2.3']) {
    assert.equal(isLoopback(address), true, address);
  }
  for (const address of [
    '10.1.2.3',
    '192.0.2.2',
    '::ffff:10.0.0.1',
    'fd00::2',
    '128.0.0.1',
    '::',
    '0.0.0.0',
    '',
    undefined,
  ]) {
    assert.equal(isLoopback(address), false, String(address));
  }
});

test('with admin.token: 401 without or with a wrong token, 200 with it; reads need none; mutations are logged', async (t) => {
  const { gateway, port, lines } = await startWithLogs(t, { listen: '127.0.0.1:0', admin: { token: 's3cret-token' } });
  const path = '/fleet/backends/127.0.0.1:9/drain';

  const missing = await post('127.0.0.1', port, path);
  assert.equal(missing.status, 401, 'loopback is not enough once a token is set');
  assert.match(missing.body, /"type":"authentication_error"/);
  assert.match(String(missing.headers['www-authenticate']), /^Bearer/);
  const wrong = await post('127.0.0.1', port, path, { headers: { authorization: 'Bearer s3cret-tokeN' } });
  assert.equal(wrong.status, 401);
  assert.match(wrong.body, /invalid admin token/);
  const prefix = await post('127.0.0.1', port, path, { headers: { authorization: 'Bearer s3cret' } });
  assert.equal(prefix.status, 401);
  assert.equal(gateway.fleet.registry.get('127.0.0.1:9')?.state, 'down', 'refused calls changed nothing');

  const ok = await post('127.0.0.1', port, path, { headers: { authorization: 'Bearer s3cret-token' } });
  assert.equal(ok.status, 200, ok.body);
  assert.equal(gateway.fleet.registry.get('127.0.0.1:9')?.state, 'draining');

  const status = await fetch(`http://127.0.0.1:${port}/fleet/status`);
  assert.equal(status.status, 200, 'reading the fleet needs no token');

  const done = lines.find((line) => line.admin?.action === 'drain backend 127.0.0.1:9');
  assert.ok(done, 'the mutation is logged');
  assert.equal(done.admin?.from, '127.0.0.1', 'with who did it');
  assert.equal(lines.filter((line) => /admin: refused/.test(line.msg)).length, 3, 'refusals are logged too');
  assert.ok(!JSON.stringify(lines).includes('s3cret-token'), 'the token never reaches the log');

  // No caller is exempt: an in-process call with no token is refused too (SIGHUP calls reload() directly).
  const injected = await gateway.app.inject({ method: 'POST', url: '/fleet/backends/127.0.0.1:9/resume' });
  assert.equal(injected.statusCode, 401);
});

test('without a token: accepted from loopback (any 127.x, ::1, mapped), 403 from a non-loopback address', async (t) => {
  const { gateway, port } = await startWithLogs(t, { listen: '[::]:0' });
  const path = '/fleet/backends/127.0.0.1:9/drain';

  assert.equal((await post('127.0.0.1', port, path)).status, 200, 'from 127.0.0.1 (seen as ::ffff:127.0.0.1)');
  assert.equal((await post('127.0.0.1', port, path, { localAddress: '127.0.0.2' })).status, 200, 'from 127.0.0.2');
  assert.equal((await post('::1', port, path)).status, 200, 'from ::1');

  const v4 = nonLoopbackAddress('IPv4');
  if (v4 === null) {
    t.diagnostic('no non-loopback IPv4 address on this machine: real-socket 403 case skipped');
  } else {
    const refused = await post(v4, port, path, {
      localAddress: v4,
      headers: { 'x-forwarded-for': '127.0.0.1', 'x-real-ip': '127.0.0.1' },
    });
    assert.equal(refused.status, 403, `from ${v4}, whatever X-Forwarded-For says`);
    assert.match(refused.body, /"type":"permission_error"/);
    assert.match(refused.body, /only from loopback/);
  }
  const v6 = nonLoopbackAddress('IPv6');
  if (v6 !== null) assert.equal((await post(v6, port, path, { localAddress: v6 })).status, 403, `from ${v6}`);

  // The same decision for a stated source address, without a second interface.
  for (const [remoteAddress, expected] of [
    ['10.1.2.3', 403],
    ['::ffff:10.1.2.3', 403],
    ['127.0.0.5', 200],
  ] as const) {
    const answer = await gateway.app.inject({ method: 'POST', url: path, remoteAddress });
    assert.equal(answer.statusCode, expected, remoteAddress);
  }
});
