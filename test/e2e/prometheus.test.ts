/**
 * A real Prometheus scrapes a fleetgate in front of simulated SGLang servers: what an operator's
 * Prometheus stores follows the fleet (a crashed backend's `fleetgate_backend_up` goes 1 -> 0 and back
 * to 1 after a restart), the alert rules load and evaluate without errors on real data, and every
 * dashboard query is valid PromQL that Prometheus answers.
 *
 * No skip when Prometheus is missing: CI installs the Debian `prometheus` package.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { backendsFor, createSims, startGateway, startReadyFleet } from '../helpers/fleet.js';
import { freePort } from '../helpers/net.js';
import { waitFor } from '../helpers/wait.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PROMETHEUS = process.env.PROMETHEUS_BIN ?? '/usr/bin/prometheus';

interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}

interface PrometheusHandle {
  url: string;
  /** Instant query; rejects on a PromQL error. */
  query(promql: string): Promise<Sample[]>;
  log(): string;
}

async function startPrometheus(
  t: { after(fn: () => unknown): void },
  target: string,
  rules = join(ROOT, 'config/prometheus/alerts.yml'),
): Promise<PrometheusHandle> {
  if (!existsSync(PROMETHEUS))
    assert.fail(`${PROMETHEUS} not found: install the prometheus package (apt-get install prometheus)`);
  const dir = mkdtempSync(join(tmpdir(), 'fleetgate-prometheus-'));
  const port = await freePort();
  const config = [
    'global:',
    '  scrape_interval: 1s',
    '  evaluation_interval: 1s',
    'rule_files:',
    `  - ${JSON.stringify(rules)}`,
    'scrape_configs:',
    '  - job_name: fleetgate',
    '    static_configs:',
    `      - targets: [${JSON.stringify(target)}]`,
  ].join('\n');
  writeFileSync(join(dir, 'prometheus.yml'), `${config}\n`);
  let output = '';
  const child: ChildProcess = spawn(
    PROMETHEUS,
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-20_000);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  t.after(async () => {
    if (child.exitCode === null && child.pid !== undefined) {
      process.kill(child.pid, 'SIGTERM');
      const killer = setTimeout(() => child.pid !== undefined && process.kill(child.pid, 'SIGKILL'), 5_000);
      await exited;
      clearTimeout(killer);
    }
    rmSync(dir, { recursive: true, force: true });
  });

  const url = `http://127.0.0.1:${port}`;
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`prometheus exited ${child.exitCode}:\n${output}`);
      const res = await request(`${url}/-/ready`);
      await res.body.dump();
      return res.statusCode === 200;
    },
    { timeoutMs: 30_000, intervalMs: 100, what: 'prometheus ready' },
  );
  return {
    url,
    log: () => output,
    async query(promql) {
      const res = await request(`${url}/api/v1/query?query=${encodeURIComponent(promql)}`);
      const body = (await res.body.json()) as { status: string; error?: string; data?: { result: Sample[] } };
      if (body.status !== 'success') throw new Error(`query failed: ${body.error}\n${promql}`);
      return body.data?.result ?? [];
    },
  };
}

function dashboardExpressions(): Array<{ title: string; expr: string }> {
  const dashboard = JSON.parse(readFileSync(join(ROOT, 'config/grafana/fleetgate.json'), 'utf8'));
  const out: Array<{ title: string; expr: string }> = [];
  for (const panel of dashboard.panels as Array<{ title: string; targets?: Array<{ expr: string }> }>) {
    for (const target of panel.targets ?? []) out.push({ title: panel.title, expr: target.expr });
  }
  return out;
}

/** What Grafana would send with every backend and job selected. */
function substituteVariables(expr: string): string {
  return expr.replaceAll('$__rate_interval', '1m').replaceAll('$job', '.*').replaceAll('$backend', '.*');
}

test('Prometheus sees a backend go down and come back, evaluates the alerts and answers the dashboard', async (t) => {
  const started = Date.now();
  const sims = await createSims(t, [{}, {}]);
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady(10_000)));
  const { url, gateway } = await startGateway(t, {
    backends: backendsFor(sims),
    health: { starting_interval: '100ms', interval: '200ms' },
  });
  await waitFor(() => gateway.fleet.registry.ready.length === 2, { what: 'both backends ready' });
  const generation = await request(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
  });
  await generation.body.dump();
  assert.equal(generation.statusCode, 200);
  const stream = await request(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }),
  });
  await stream.body.dump();
  assert.equal(stream.statusCode, 200);

  const prometheus = await startPrometheus(t, new URL(url).host);
  const victim = sims[1].name;
  const upOf = async (backend: string): Promise<string | undefined> => {
    const result = await prometheus.query(`fleetgate_backend_up{backend="${backend}"}`);
    return result[0]?.value[1];
  };
  const waitUp = (value: string, what: string) =>
    waitFor(async () => (await upOf(victim)) === value, { timeoutMs: 20_000, intervalMs: 250, what }).catch((error) => {
      throw new Error(`${String(error)}\nprometheus log:\n${prometheus.log()}`);
    });

  await waitUp('1', `${victim} up=1 in Prometheus`);
  assert.equal(await upOf(sims[0].name), '1');

  await sims[1].crash();
  await waitUp('0', `${victim} up=0 in Prometheus after the crash`);
  const state = await prometheus.query(`fleetgate_backend_state{backend="${victim}"} == 1`);
  assert.equal(state.length, 1);
  assert.notEqual(state[0].metric.state, 'ready');
  assert.equal(await upOf(sims[0].name), '1', 'the other backend stays up');

  await sims[1].restart();
  await waitUp('1', `${victim} up=1 in Prometheus after the restart`);
  const transitions = await prometheus.query(
    `sum(fleetgate_backend_transitions_total{backend="${victim}", from="ready"})`,
  );
  assert.ok(Number(transitions[0]?.value[1]) >= 1, 'the transition out of ready was counted');

  // Alert rules: loaded from config/prometheus/alerts.yml and evaluated on this data without error.
  const shipped = parseYaml(readFileSync(join(ROOT, 'config/prometheus/alerts.yml'), 'utf8')) as {
    groups: Array<{ rules: unknown[] }>;
  };
  const ruleCount = shipped.groups.reduce((n, g) => n + g.rules.length, 0);
  await waitFor(
    async () => {
      const res = await request(`${prometheus.url}/api/v1/rules?type=alert`);
      const body = (await res.body.json()) as {
        data: { groups: Array<{ name: string; rules: Array<{ name: string; health: string; lastError?: string }> }> };
      };
      const rules = body.data.groups.flatMap((g) => g.rules);
      const bad = rules.filter((r) => r.health !== 'ok');
      assert.deepEqual(bad, [], 'alert rules evaluate without errors');
      return rules.length === ruleCount && body.data.groups.every((g) => g.name === 'fleetgate');
    },
    { timeoutMs: 10_000, intervalMs: 250, what: 'alert rules evaluated' },
  );

  // Dashboard: every query parses and runs; the core panels have data.
  const empty: string[] = [];
  for (const { title, expr } of dashboardExpressions()) {
    const result = await prometheus.query(substituteVariables(expr));
    if (result.length === 0) empty.push(title);
  }
  for (const title of [
    'Fleet readiness',
    'Backend state',
    'Ready backends',
    'Request rate by backend',
    'In-flight requests and caps',
    'Time to first token p50 / p99 by backend',
    'Inter-token latency p99 by backend',
    'Time per output token (fleet) p50 / p99',
    'Output tokens per request (fleet) p50 / p99',
  ]) {
    assert.ok(!empty.includes(title), `dashboard panel "${title}" has data`);
  }
  const stateRows = await prometheus.query(
    substituteVariables(dashboardExpressions().find((e) => e.title === 'Backend state')?.expr ?? ''),
  );
  assert.deepEqual(
    stateRows.map((row) => [row.metric.backend, row.value[1]]).sort(),
    [
      ['gpu0', '0'],
      ['gpu1', '0'],
    ],
    'state timeline: one row per backend, 0 = ready',
  );
  t.diagnostic(`dashboard panels without data in this short run: ${empty.join(', ') || 'none'}`);
  t.diagnostic(`prometheus e2e took ${Date.now() - started} ms`);
});

/** alerts.yml with `alert`'s `for` cut to 0 s, its expression unchanged, written to a temporary file. */
function rulesWithoutHold(alert: string): string {
  const rules = parseYaml(readFileSync(join(ROOT, 'config/prometheus/alerts.yml'), 'utf8'));
  const rule = rules.groups
    .flatMap((g: { rules: Array<{ alert: string; for?: string }> }) => g.rules)
    .find((r: { alert: string }) => r.alert === alert);
  assert.ok(rule, `${alert} in alerts.yml`);
  rule.for = '0s';
  const dir = mkdtempSync(join(tmpdir(), 'fleetgate-rules-'));
  const file = join(dir, 'alerts.yml');
  writeFileSync(file, stringifyYaml(rules));
  return file;
}

test("the straggler alert fires on the demo's slowed backend (3x, as `fleetgate demo --slow-on`)", async (t) => {
  // The demo's pace (sim --speed demo: 20 ms a token) and its straggler, generating 3x slower.
  const engine = { tokenMs: 20 };
  const { url } = await startReadyFleet(t, [{ engine }, { engine }, { engine: { ...engine, slowdown: 3 } }], {
    routing: { policy: 'round-robin' },
  });
  const prometheus = await startPrometheus(t, new URL(url).host, rulesWithoutHold('FleetgateBackendSlowFirstToken'));
  const streamOnce = async () => {
    const res = await request(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
    });
    await res.body.dump();
  };
  let firing: Array<{ labels: Record<string, string>; state: string }> = [];
  const deadline = Date.now() + 90_000;
  // Bounded: three streams at a time (one per backend, round-robin) until the alert fires on the
  // slowed backend alone or 90 s pass. With the rule's 10-minute hold cut to 0, one slow first token
  // elsewhere on a busy machine (a p99 of a few samples) can fire for a while; more samples clear it.
  while (Date.now() < deadline) {
    await Promise.all([streamOnce(), streamOnce(), streamOnce()]);
    const res = await request(`${prometheus.url}/api/v1/alerts`);
    const body = (await res.body.json()) as {
      data: { alerts: Array<{ labels: Record<string, string>; state: string }> };
    };
    firing = body.data.alerts.filter(
      (a) => a.labels.alertname === 'FleetgateBackendSlowFirstToken' && a.state === 'firing',
    );
    if (firing.length === 1 && firing[0].labels.backend === 'gpu2') break;
  }
  assert.deepEqual(
    firing.map((a) => a.labels.backend),
    ['gpu2'],
    `the slowed backend alone is the straggler\nprometheus log:\n${prometheus.log()}`,
  );
});
