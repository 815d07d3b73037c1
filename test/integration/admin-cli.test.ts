/**
 * `fleetgate drain NAME` / `fleetgate resume NAME` as a person runs them: exit 0 done, 1 with the
 * server's own message when refused (unknown name, token), 1 when unreachable, 2 on usage errors.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { fleetgateEntry } from '../helpers/cli-entry.js';
import { startGateway } from '../helpers/fleet.js';
import { freePort } from '../helpers/net.js';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function fleetgate(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...fleetgateEntry(), ...args],
      {
        cwd: join(import.meta.dirname, '../..'),
        env: { ...process.env, FLEETGATE_URL: '', FLEETGATE_ADMIN_TOKEN: '', ...env },
      },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

test('drain and resume: 0 and a one-line answer; the fleet follows', async (t) => {
  const { url, gateway } = await startGateway(t, { backends: [{ url: 'http://127.0.0.1:9', name: 'gpu0' }] });

  const drain = await fleetgate(['drain', 'gpu0', '--url', url]);
  assert.equal(drain.code, 0, drain.stderr);
  assert.match(drain.stdout, /^drained gpu0: draining, 0 in flight, drain deadline 1m\n$/);
  assert.equal(gateway.fleet.registry.get('gpu0')?.state, 'draining');

  const again = await fleetgate(['drain', 'gpu0', '--url', url, '--deadline', '10s']);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stdout, /, drain deadline 10s\n$/, 'the call’s own deadline');
  const badDeadline = await fleetgate(['drain', 'gpu0', '--url', url, '--deadline', 'soon']);
  assert.equal(badDeadline.code, 1);
  assert.match(badDeadline.stderr, /fleetgate drain: 400 deadline: "soon" is not a duration/);

  const resume = await fleetgate(['resume', 'gpu0'], { FLEETGATE_URL: url });
  assert.equal(resume.code, 0, resume.stderr);
  assert.match(resume.stdout, /^resumed gpu0: /);
  assert.notEqual(gateway.fleet.registry.get('gpu0')?.state, 'draining');
});

test('refusals exit 1 with the server message; usage errors exit 2', async (t) => {
  const { url } = await startGateway(t, {
    backends: [{ url: 'http://127.0.0.1:9', name: 'gpu0' }],
    admin: { token: 'tok' },
  });
  const closedPort = await freePort();
  const [
    unknown,
    noToken,
    badToken,
    goodToken,
    envToken,
    unreachable,
    noName,
    twoNames,
    badFlag,
    badUrl,
    resumeDeadline,
  ] = await Promise.all([
    fleetgate(['drain', 'gpu9', '--url', url, '--token', 'tok']),
    fleetgate(['drain', 'gpu0', '--url', url]),
    fleetgate(['drain', 'gpu0', '--url', url, '--token', 'nope']),
    fleetgate(['drain', 'gpu0', '--url', url, '--token', 'tok']),
    fleetgate(['resume', 'gpu0', '--url', url], { FLEETGATE_ADMIN_TOKEN: 'tok' }),
    fleetgate(['drain', 'gpu0', '--url', `http://127.0.0.1:${closedPort}`]),
    fleetgate(['drain', '--url', url]),
    fleetgate(['resume', 'a', 'b', '--url', url]),
    fleetgate(['drain', 'gpu0', '--bogus']),
    fleetgate(['drain', 'gpu0', '--url', 'ftp://x']),
    fleetgate(['resume', 'gpu0', '--url', url, '--deadline', '1s']),
  ]);

  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /fleetgate drain: 404 no backend named "gpu9"/);
  assert.equal(noToken.code, 1);
  assert.match(noToken.stderr, /401 admin token required/);
  assert.equal(badToken.code, 1);
  assert.match(badToken.stderr, /401 invalid admin token/);
  assert.equal(goodToken.code, 0, goodToken.stderr);
  assert.equal(envToken.code, 0, envToken.stderr);
  assert.equal(unreachable.code, 1);
  assert.match(unreachable.stderr, /cannot reach fleetgate .*ECONNREFUSED/);
  for (const usage of [noName, twoNames, badFlag, badUrl, resumeDeadline]) {
    assert.equal(usage.code, 2, usage.stderr);
    assert.match(usage.stderr, /usage: fleetgate (drain|resume) NAME|must be an http/);
  }
  assert.match(noName.stderr, /needs a backend NAME/);
});
