/**
 * The Prometheus config files are valid and the alert rules behave as their unit tests say, checked
 * by Prometheus's own `promtool`. No skip when promtool is missing: CI installs it (Debian
 * `prometheus` package), and a skipped check would let broken rules ship.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PROMTOOL = process.env.PROMTOOL ?? 'promtool';

function promtool(...args: string[]): string {
  const run = spawnSync(PROMTOOL, args, { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  if (run.error) assert.fail(`cannot run ${PROMTOOL} (install the prometheus package): ${run.error.message}`);
  const output = `${run.stdout}${run.stderr}`;
  assert.equal(run.status, 0, `promtool ${args.join(' ')} exited ${run.status}:\n${output}`);
  return output;
}

test('promtool check rules: alerts.yml is valid', () => {
  assert.match(promtool('check', 'rules', 'config/prometheus/alerts.yml'), /SUCCESS: 12 rules found/);
});

test('promtool test rules: every alert fires when it should and not when it should not', () => {
  assert.match(promtool('test', 'rules', 'config/prometheus/alerts.test.yml'), /SUCCESS/);
});

test('promtool check config: the example prometheus.yml (with its rule file) is valid', () => {
  const output = promtool('check', 'config', 'config/prometheus/prometheus.yml');
  assert.match(output, /is valid prometheus config file syntax/);
  assert.match(output, /SUCCESS: 12 rules found/);
});

interface AlertCase {
  alertname: string;
  exp_alerts?: unknown[];
}

test('alerts.test.yml covers every alert both firing and silent', () => {
  const read = (file: string) => parseYaml(readFileSync(`${ROOT}config/prometheus/${file}`, 'utf8'));
  const alerts: string[] = read('alerts.yml').groups.flatMap((g: { rules: Array<{ alert: string }> }) =>
    g.rules.map((r) => r.alert),
  );
  const cases: AlertCase[] = read('alerts.test.yml').tests.flatMap(
    (t: { alert_rule_test?: AlertCase[] }) => t.alert_rule_test ?? [],
  );
  for (const alert of alerts) {
    const mine = cases.filter((c) => c.alertname === alert);
    assert.ok(
      mine.some((c) => (c.exp_alerts ?? []).length > 0),
      `${alert} has a case where it fires`,
    );
    assert.ok(
      mine.some((c) => (c.exp_alerts ?? []).length === 0),
      `${alert} has a case where it stays silent`,
    );
  }
});
