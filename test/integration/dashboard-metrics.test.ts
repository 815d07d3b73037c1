/**
 * Every metric the Grafana dashboard and the alert rules query is one fleetgate really exports: read
 * from the live `/metrics` of a gateway that admitted simulated backends, served requests and saw a
 * backend fail, so that labelled counters and histograms have series.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { request } from 'undici';
import { parse as parseYaml } from 'yaml';
import { backendsFor, createSims, startGateway } from '../helpers/fleet.js';
import { metricNamesIn, missingReason, parseExposition, sampleValue } from '../helpers/prometheus-text.js';
import { waitFor } from '../helpers/wait.js';

const ROOT = new URL('../../', import.meta.url);
const PREFIXES = ['fleetgate_', 'process_', 'nodejs_'];

interface Rule {
  alert: string;
  expr: string;
  annotations?: Record<string, string>;
}

function dashboardQueries(): string[] {
  const dashboard = JSON.parse(readFileSync(new URL('config/grafana/fleetgate.json', ROOT), 'utf8'));
  const queries: string[] = [];
  const visit = (panels: Array<Record<string, unknown>>) => {
    for (const panel of panels) {
      for (const target of (panel.targets as Array<{ expr?: string }> | undefined) ?? []) {
        if (target.expr) queries.push(target.expr);
      }
      visit((panel.panels as Array<Record<string, unknown>> | undefined) ?? []);
    }
  };
  visit(dashboard.panels);
  for (const variable of dashboard.templating.list as Array<{ definition?: string }>) {
    if (variable.definition) queries.push(variable.definition);
  }
  return queries;
}

function alertTexts(): string[] {
  const rules = parseYaml(readFileSync(new URL('config/prometheus/alerts.yml', ROOT), 'utf8')).groups.flatMap(
    (group: { rules: Rule[] }) => group.rules,
  ) as Rule[];
  return rules.flatMap((rule) => [rule.expr, ...Object.values(rule.annotations ?? {})]);
}

async function chat(url: string) {
  const res = await request(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }),
  });
  const body = await res.body.text();
  assert.equal(res.statusCode, 200, body);
}

test('every metric in the dashboard and the alert rules is exported by a live fleetgate', async (t) => {
  const sims = await createSims(t, [{}, {}]);
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady(10_000)));
  const { url, gateway } = await startGateway(t, {
    backends: backendsFor(sims),
    // Round-robin and a slow ready interval: the next request goes to the crashed backend before a
    // probe notices, so an upstream error and a retry really happen.
    routing: { policy: 'round-robin', retries: 2 },
    health: { starting_interval: '50ms', interval: '60s' },
  });
  await waitFor(() => gateway.fleet.registry.ready.length === 2, { what: 'both backends ready' });
  await chat(url);
  await sims[1].crash();
  await chat(url);
  await chat(url);

  const res = await request(`${url}/metrics`);
  const text = await res.body.text();
  assert.equal(res.statusCode, 200);
  assert.match(String(res.headers['content-type']), /^text\/plain; version=0\.0\.4/);
  assert.ok((sampleValue(text, 'fleetgate_retries_total', { backend: 'gpu1' }) ?? 0) >= 1, 'a retry happened');
  assert.ok(
    (sampleValue(text, 'fleetgate_backend_generated_tokens_total', { backend: 'gpu0' }) ?? 0) > 0,
    'tokens counted',
  );
  assert.ok(
    (sampleValue(text, 'fleetgate_health_checks_total', { backend: 'gpu0', result: 'pass' }) ?? 0) > 0,
    "probes are counted (the registry's 'probe' event)",
  );
  const exposition = parseExposition(text);

  const sources: Array<[string, string[]]> = [
    ['config/grafana/fleetgate.json', dashboardQueries()],
    ['config/prometheus/alerts.yml', alertTexts()],
  ];
  for (const [file, texts] of sources) {
    const names = metricNamesIn(texts.join('\n'), PREFIXES);
    assert.ok(names.size >= 5, `${file}: found ${[...names].join(', ')}`);
    const missing = [...names].map((name) => missingReason(name, exposition)).filter((reason) => reason !== null);
    assert.deepEqual(missing, [], `${file} queries metrics fleetgate does not export`);
  }

  const used = new Set(sources.flatMap(([, texts]) => [...metricNamesIn(texts.join('\n'), ['fleetgate_'])]));
  const familiesUsed = new Set([...used].map((name) => name.replace(/_(bucket|sum|count)$/, '')));
  const unused = [...exposition.types.keys()].filter(
    (family) => family.startsWith('fleetgate_') && !familiesUsed.has(family),
  );
  assert.deepEqual(unused, [], 'every fleetgate metric appears on the dashboard or in an alert');
});

test('the checker itself rejects names that select nothing', () => {
  const exposition = parseExposition(
    [
      '# TYPE fleetgate_request_duration_seconds histogram',
      'fleetgate_request_duration_seconds_bucket{le="1",backend="a"} 1',
      'fleetgate_request_duration_seconds_sum{backend="a"} 0.5',
      'fleetgate_request_duration_seconds_count{backend="a"} 1',
      '# TYPE fleetgate_requests_total counter',
      'fleetgate_requests_total{backend="a",code="200"} 1',
      '# TYPE fleetgate_upstream_errors_total counter',
    ].join('\n'),
  );
  assert.equal(missingReason('fleetgate_request_duration_seconds_bucket', exposition), null);
  assert.equal(missingReason('fleetgate_requests_total', exposition), null);
  assert.match(String(missingReason('fleetgate_request_duration_seconds', exposition)), /histogram/);
  assert.match(String(missingReason('fleetgate_requests_count', exposition)), /no such metric/);
  assert.match(String(missingReason('fleetgate_upstream_errors_total', exposition)), /no samples/);
  assert.match(String(missingReason('fleetgate_requests', exposition)), /no such metric/);
  assert.deepEqual(
    [
      ...metricNamesIn(
        'histogram_quantile(0.9, sum by (le) (rate(fleetgate_x_bucket{a="fleetgate"}[5m]))) / process_cpu_seconds_total',
        PREFIXES,
      ),
    ],
    ['fleetgate_x_bucket', 'process_cpu_seconds_total'],
  );
});
