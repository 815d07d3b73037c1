/**
 * The Kubernetes manifests in config/k8s parse and agree with each other and with fleetgate: ports,
 * probe paths, the mounted config (valid for fleetgate), the headless Service that `discovery.dns`
 * names, the ServiceMonitor's target, and a PrometheusRule identical to the shipped alert rules.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse, parseAllDocuments } from 'yaml';
import { settingsFromEnv } from '../../src/config/load.js';
import { validateConfig } from '../../src/config/validate.js';

const root = join(import.meta.dirname, '../..');
const dir = join(root, 'config/k8s');

// biome-ignore lint/suspicious/noExplicitAny: manifests are free-form YAML, checked field by field below.
type Manifest = any;

const files = readdirSync(dir).filter((name) => name.endsWith('.yaml'));
const manifests: Manifest[] = files.flatMap((name) =>
  parseAllDocuments(readFileSync(join(dir, name), 'utf8')).map((doc) => {
    assert.deepEqual(doc.errors, [], `${name} parses`);
    return doc.toJS();
  }),
);
const one = (kind: string, name?: string): Manifest => {
  const found = manifests.filter((m) => m.kind === kind && (name === undefined || m.metadata?.name === name));
  assert.equal(found.length, 1, `exactly one ${kind}${name ? ` ${name}` : ''}`);
  return found[0];
};

const deployment = one('Deployment', 'fleetgate');
const pod = deployment.spec.template.spec;
const container = pod.containers[0];
const containerPort = (port: number | string) =>
  typeof port === 'number' ? port : container.ports.find((p: Manifest) => p.name === port)?.containerPort;
const configMap = one('ConfigMap', 'fleetgate-config');
const fleetgateYaml = configMap.data['fleetgate.yaml'];
const config = validateConfig(parse(fleetgateYaml), 'config/k8s/configmap.yaml');

test('every manifest has a kind, a name and the same namespace; kustomization lists every file', () => {
  const resources = manifests.filter((m) => m.kind !== 'Kustomization');
  for (const m of resources) {
    assert.ok(m.apiVersion && m.kind && m.metadata?.name, JSON.stringify(m).slice(0, 80));
    assert.equal(m.metadata.namespace, 'inference', `${m.kind} ${m.metadata.name}`);
  }
  const kustomization = one('Kustomization');
  assert.deepEqual([...kustomization.resources].sort(), files.filter((f) => f !== 'kustomization.yaml').sort());
});

test('Deployment: 2 replicas, serve --config on the mounted ConfigMap, probes /readyz and /livez on 8080, resources', () => {
  assert.equal(deployment.spec.replicas, 2);
  assert.deepEqual(deployment.spec.selector.matchLabels, deployment.spec.template.metadata.labels);
  assert.deepEqual(container.args, ['serve', '--config', '/app/config/fleetgate.yaml']);

  const mount = container.volumeMounts.find((m: Manifest) =>
    '/app/config/fleetgate.yaml'.startsWith(`${m.mountPath}/`),
  );
  assert.ok(mount, 'the config file is on a mounted volume');
  const volume = pod.volumes.find((v: Manifest) => v.name === mount.name);
  assert.equal(volume.configMap.name, configMap.metadata.name);
  const key = '/app/config/fleetgate.yaml'.slice(mount.mountPath.length + 1);
  assert.equal(typeof configMap.data[key], 'string', `the ConfigMap has ${key}`);

  assert.equal(config.listen.port, 8080);
  assert.equal(containerPort('http'), 8080);
  assert.equal(container.readinessProbe.httpGet.path, '/readyz');
  assert.equal(containerPort(container.readinessProbe.httpGet.port), config.listen.port);
  assert.equal(container.livenessProbe.httpGet.path, '/livez');
  assert.equal(containerPort(container.livenessProbe.httpGet.port), config.listen.port);

  for (const kind of ['requests', 'limits']) {
    assert.ok(container.resources[kind].cpu && container.resources[kind].memory, `resources.${kind}`);
  }
});

test('losing a replica: PodDisruptionBudget minAvailable 1, readiness on /readyz, preStop pause, grace covering shutdown.grace', () => {
  const pdb = one('PodDisruptionBudget', 'fleetgate');
  assert.equal(pdb.apiVersion, 'policy/v1');
  assert.equal(pdb.spec.minAvailable, 1);
  assert.deepEqual(pdb.spec.selector.matchLabels, deployment.spec.template.metadata.labels);
  assert.ok(deployment.spec.replicas > pdb.spec.minAvailable, 'one replica may be evicted at a time');
  assert.equal(container.readinessProbe.httpGet.path, '/readyz');
  const command: string[] = container.lifecycle.preStop.exec.command;
  assert.equal(command[0], 'sleep');
  const preStopMs = Number(command[1]) * 1000;
  assert.ok(preStopMs > 0, 'a preStop pause lets the endpoints controller take the pod out first');
  // The readiness probe needs its failureThreshold periods to notice: the pause covers that too.
  const probeMs = container.readinessProbe.periodSeconds * container.readinessProbe.failureThreshold * 1000;
  assert.ok(preStopMs >= Math.min(probeMs, 5000), 'the pause is at least a few seconds');
  const graceMs = pod.terminationGracePeriodSeconds * 1000;
  assert.ok(graceMs > preStopMs + config.shutdown.grace, 'the pod outlives the pause plus fleetgate’s own drain');
});

test('Service: port 8080 to the container port, selecting the fleetgate pods', () => {
  const service = one('Service', 'fleetgate');
  const port = service.spec.ports[0];
  assert.equal(port.port, 8080);
  assert.equal(containerPort(port.targetPort), 8080);
  assert.deepEqual(service.spec.selector, deployment.spec.template.metadata.labels);
});

test('headless Service: clusterIP None on 30000, and discovery.dns names it', () => {
  const headless = manifests.find((m) => m.kind === 'Service' && m.spec.clusterIP === 'None');
  assert.ok(headless, 'a headless Service');
  assert.equal(headless.spec.ports[0].port, 30000);
  assert.ok(headless.spec.selector, 'it selects the SGLang pods');
  assert.ok(config.discovery, 'the config uses DNS discovery');
  const [service, namespace] = config.discovery.dns.split('.');
  assert.equal(service, headless.metadata.name);
  assert.equal(namespace, headless.metadata.namespace);
  assert.equal(config.discovery.port, headless.spec.ports[0].port);
});

test('ServiceMonitor scrapes /metrics on the fleetgate Service port', () => {
  const monitor = one('ServiceMonitor', 'fleetgate');
  assert.equal(monitor.apiVersion, 'monitoring.coreos.com/v1');
  const service = one('Service', 'fleetgate');
  for (const [key, value] of Object.entries(monitor.spec.selector.matchLabels)) {
    assert.equal(service.metadata.labels[key], value, `selects the Service by ${key}`);
  }
  const endpoint = monitor.spec.endpoints[0];
  assert.equal(endpoint.path, '/metrics');
  assert.equal(service.spec.ports.find((p: Manifest) => p.name === endpoint.port)?.port, 8080);
  assert.equal(config.metrics_listen, null, '/metrics is served on the main port');
});

test('PrometheusRule: the same groups as config/prometheus/alerts.yml', () => {
  const rule = one('PrometheusRule', 'fleetgate');
  assert.equal(rule.apiVersion, 'monitoring.coreos.com/v1');
  const shipped = parse(readFileSync(join(root, 'config/prometheus/alerts.yml'), 'utf8'));
  assert.ok(shipped.groups.length > 0);
  assert.deepEqual(rule.spec.groups, shipped.groups);
});

test('the Batch API store: the Deployment takes batch.database_url from a Secret, the ConfigMap holds no URL', () => {
  const fromSecret = container.env.find((e: Manifest) => e.name === 'FLEETGATE__BATCH__DATABASE_URL');
  assert.ok(fromSecret, 'FLEETGATE__BATCH__DATABASE_URL is set');
  assert.deepEqual(fromSecret.valueFrom.secretKeyRef, { name: 'fleetgate-batch-db', key: 'url', optional: true });
  assert.equal(config.batch.database_url, null, 'no password in the ConfigMap');
  assert.equal(config.routing.replicas, deployment.spec.replicas, 'routing.replicas is the replica count');
  const env = { FLEETGATE__BATCH__DATABASE_URL: 'postgres://fleetgate:pw@postgres:5432/fleetgate' };
  const settings = settingsFromEnv(env);
  assert.deepEqual(
    settings.map((s) => s.key),
    ['batch.database_url'],
  );
  const raw = parse(fleetgateYaml);
  raw.batch = { ...raw.batch, database_url: settings[0]?.value };
  assert.equal(validateConfig(raw, 'with the Secret').batch.database_url, env.FLEETGATE__BATCH__DATABASE_URL);
  const operations = readFileSync(join(root, 'docs/operations.md'), 'utf8');
  assert.match(operations, /create secret generic fleetgate-batch-db --from-literal=url=postgres:\/\//);
});
