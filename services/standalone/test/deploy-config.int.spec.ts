import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import createIgnore from '@balena/dockerignore';
import { type ConfigurationCheck, parseConfiguration, PROBE_PATHS } from '@oc/contracts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import type { z } from 'zod';
import { billingProcessConfig } from '../../billing/src/process-config';
import { chatProcessConfig } from '../../chat/src/process-config';
import { gatewayProcessConfig } from '../../gateway/src/process-config';
import { videoProcessChecks, videoProcessConfig } from '../../video/src/process-config';
import { webhookProcessChecks, webhookProcessConfig } from '../../webhook/src/process-config';

const ROOT = resolve(import.meta.dirname, '../../..');
const SERVICES = ['gateway', 'billing', 'chat', 'video', 'webhook'] as const;
type Service = (typeof SERVICES)[number];

/** Each service's environment as its main.ts parses it: the variables it reads and the rules across them. */
const PROCESS_CONFIG: Record<Service, { schema: z.ZodObject; checks: readonly ConfigurationCheck[] }> = {
  gateway: { schema: gatewayProcessConfig, checks: [] },
  billing: { schema: billingProcessConfig, checks: [] },
  chat: { schema: chatProcessConfig, checks: [] },
  video: { schema: videoProcessConfig, checks: videoProcessChecks },
  webhook: { schema: webhookProcessConfig, checks: webhookProcessChecks },
};
const variablesOf = (service: Service) => Object.keys(PROCESS_CONFIG[service].schema.shape).sort();
/** What a process refuses to start without: whatever an empty environment is faulted for. */
function requiredOf(service: Service): string[] {
  const { schema, checks } = PROCESS_CONFIG[service];
  const parsed = parseConfiguration(schema, {}, checks);
  return parsed.success ? [] : parsed.problems.map((p) => p.variable).sort();
}
/** Variables that are secrets, or may carry credentials (connection strings): never in a ConfigMap or a plain value. */
const SECRET_VARIABLES = new Set([
  'ADMIN_TOKEN',
  'WEBHOOK_SECRET_KEY',
  'VIDEO_S3_ACCESS_KEY_ID',
  'VIDEO_S3_SECRET_ACCESS_KEY',
  'VIDEO_UPSTREAM_API_KEY',
  'CHAT_UPSTREAM_API_KEY',
  'STRIPE_SECRET_KEY',
  'STRIPE_WEBHOOK_SECRET',
  'EVENTSTORE_URL',
  'MONGO_URL',
  'REDIS_URL',
  'OTEL_EXPORTER_OTLP_HEADERS',
]);

/** Values of the right form for what the deployment files leave to the operator's secrets. */
const SECRET_VALUES: Record<string, string> = {
  ADMIN_TOKEN: 'a'.repeat(32),
  WEBHOOK_SECRET_KEY: Buffer.alloc(32, 7).toString('base64'),
};
const secret = (name: string, example?: string) => SECRET_VALUES[name] ?? example ?? 'operator-supplied';

/** docker compose's `${VAR:?message}` and `${VAR:-default}`, as the operator's shell would fill them. */
const interpolate = (value: unknown) =>
  String(value).replace(/\$\{(\w+)(?::([?-])([^}]*))?\}/g, (_, name: string, kind?: string, rest?: string) =>
    kind === '-' ? rest! : secret(name),
  );

// ---------------------------------------------------------------------------------------------- docker compose

interface ComposeService {
  build?: { context: string; dockerfile?: string; args?: Record<string, string> };
  image?: string;
  environment?: Record<string, unknown>;
  ports?: string[];
  healthcheck?: { test: string[] | string };
  depends_on?: Record<string, { condition?: string }> | string[];
  restart?: string;
  command?: string[] | string;
  volumes?: string[];
}
const compose = () =>
  parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as { services: Record<string, ComposeService> };

const composeEnvironment = (service: ComposeService) =>
  Object.fromEntries(Object.entries(service.environment ?? {}).map(([k, v]) => [k, interpolate(v)]));

function composeEnvironments(): Record<string, Record<string, string>> {
  const { services } = compose();
  return Object.fromEntries(SERVICES.map((name) => [name, composeEnvironment(services[name] ?? {})]));
}

const healthTest = (service: ComposeService) => [service.healthcheck?.test ?? []].flat().join(' ');

/**
 * An image's tag, or undefined when it has none (which means `latest`). A registry's port (`host:5000/name`) is
 * not a tag, nor is a digest's algorithm.
 */
const tagOf = (image: string) => /:([^:/@]+)$/.exec(image.split('@')[0]!)?.[1];
/** Our images are tagged with the version of the service they run, so that a file deploys the release it names. */
const versionOf = (service: string) => JSON.parse(readFileSync(join(ROOT, `services/${service}/package.json`), 'utf8')).version as string;
/** A pinned image: a tag that names a release, neither absent nor `latest` (which moves under a running deployment). */
function expectPinned(image: string, what: string) {
  const tag = tagOf(image);
  expect(tag, `${what}: ${image} has a tag`).toBeDefined();
  expect(tag, `${what}: ${image}`).not.toMatch(/^latest$/i);
}
/** A one-shot job (the bucket's creation): it runs to completion, so it is waited for, not health-checked. */
const isJob = (service: ComposeService) => service.restart === 'no';

// ---------------------------------------------------------------------------------------------- Kubernetes

interface EnvEntry {
  name: string;
  value?: string;
  valueFrom?: {
    configMapKeyRef?: { name: string; key: string; optional?: boolean };
    secretKeyRef?: { name: string; key: string; optional?: boolean };
    fieldRef?: { fieldPath: string };
  };
}
interface Probe {
  httpGet?: { path: string; port: number | string };
}
interface Container {
  name: string;
  image: string;
  ports?: Array<{ name?: string; containerPort: number }>;
  env?: EnvEntry[];
  envFrom?: unknown[];
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  startupProbe?: Probe;
  lifecycle?: { preStop?: { exec?: { command: string[] } } };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  volumeMounts?: Array<{ name: string; mountPath: string }>;
}
type Manifest = any;

function manifests(): Manifest[] {
  const dir = join(ROOT, 'deploy/k8s');
  return readdirSync(dir)
    .filter((file) => file.endsWith('.yaml'))
    .flatMap((file) => parseAllDocuments(readFileSync(join(dir, file), 'utf8')).map((doc) => doc.toJS() as Manifest))
    .filter(Boolean);
}
const configMapOf = (docs: Manifest[]) => docs.find((d) => d.kind === 'ConfigMap' && d.metadata.name === 'oc-config').data as Record<string, string>;
const secretOf = (docs: Manifest[]) => docs.find((d) => d.kind === 'Secret' && d.metadata.name === 'oc-secrets').stringData as Record<string, string>;
const workloads = (docs: Manifest[]) => docs.filter((d) => d.kind === 'Deployment' || d.kind === 'StatefulSet');
const containerOf = (docs: Manifest[], service: string): { workload: Manifest; container: Container } => {
  for (const workload of workloads(docs)) {
    const container = (workload.spec.template.spec.containers as Container[]).find((c) => c.name === service);
    if (container) return { workload, container };
  }
  throw new Error(`no container named ${service}`);
};

/** The environment a container gets, as Kubernetes would resolve it from the ConfigMap and the Secret. */
function kubernetesEnvironment(docs: Manifest[], container: Container): Record<string, string> {
  const configMap = configMapOf(docs);
  const secrets = secretOf(docs);
  const env: Record<string, string> = {};
  for (const entry of container.env ?? []) {
    const from = entry.valueFrom;
    if (entry.value !== undefined) env[entry.name] = entry.value;
    else if (from?.configMapKeyRef && from.configMapKeyRef.key in configMap) env[entry.name] = configMap[from.configMapKeyRef.key]!;
    else if (from?.secretKeyRef && from.secretKeyRef.key in secrets) env[entry.name] = secret(entry.name, secrets[from.secretKeyRef.key]);
    else if (from?.fieldRef) env[entry.name] = 'pod-name-0';
  }
  return env;
}

function kubernetesEnvironments(): Record<string, Record<string, string>> {
  const docs = manifests();
  return Object.fromEntries(SERVICES.map((service) => [service, kubernetesEnvironment(docs, containerOf(docs, service).container)]));
}

/** A probe's port, resolved from the container's named ports. */
const probePort = (container: Container, probe: Probe | undefined) => {
  const port = probe?.httpGet?.port;
  return typeof port === 'number' ? port : container.ports?.find((p) => p.name === port)?.containerPort;
};
/** Where the service answers probes, by its own configuration: PORT for the gateway, HEALTH_PORT for a service. */
const servingPort = (service: Service, env: Record<string, string>) =>
  Number(service === 'gateway' ? (env.PORT ?? gatewayProcessConfig.shape.PORT.parse(undefined)) : env.HEALTH_PORT);
/** How long the process lets its work in flight finish once signalled, by its own configuration. */
const shutdownGraceMs = (service: Service, env: Record<string, string>) => PROCESS_CONFIG[service].schema.parse({ ...requiredValues(service), ...env }).SHUTDOWN_GRACE_MS as number;
/** Values for what a service requires, so that its configuration parses. */
const requiredValues = (service: Service) => Object.fromEntries(requiredOf(service).map((variable) => [variable, secret(variable)]));
/**
 * What may still settle after the grace (a cut stream's charge): the margin a process is given before it is
 * killed, beyond the grace itself (service-runtime's SETTLE_AFTER_GRACE_MS).
 */
const SETTLE_MARGIN_MS = 5_000;

// ---------------------------------------------------------------------------------------------- the processes

/** The process's own verdict on an environment: `OC_CHECK_CONFIG=1` parses it as at boot and starts nothing. */
async function checkConfiguration(service: string, env: Record<string, string>, dataDir: string) {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, `services/${service}/src/main.ts`)], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env, DATA_DIR: join(dataDir, service), OC_CHECK_CONFIG: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk));
  const [code] = await once(child, 'exit');
  return { code: code as number, output: output.trim() };
}

describe('the deployment files', () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'oc-deploy-config-'));
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  it.each([
    ['docker-compose.yml', composeEnvironments],
    ['deploy/k8s', kubernetesEnvironments],
  ])('%s start every service with a configuration it accepts', async (_file, environments) => {
    const found = environments();
    expect(Object.keys(found).sort()).toEqual([...SERVICES].sort());
    const verdicts = await Promise.all(SERVICES.map(async (service) => [service, await checkConfiguration(service, found[service]!, dataDir)] as const));
    for (const [service, verdict] of verdicts) expect(verdict, service).toEqual({ code: 0, output: 'Configuration OK' });
  });

  it('refuses, naming the variable, an environment missing what production needs', async () => {
    const webhook = kubernetesEnvironments().webhook!;
    delete webhook.WEBHOOK_SECRET_KEY;
    const verdict = await checkConfiguration('webhook', webhook, dataDir);
    expect(verdict.code).toBe(78);
    expect(verdict.output).toMatch(/^Invalid configuration: WEBHOOK_SECRET_KEY: required in production mode/);
  });
});

describe('docker-compose.yml', () => {
  const { services } = compose();

  it('lets every service finish its work in flight before Docker kills it (10 s unless told otherwise)', () => {
    const seconds = (period: unknown) => {
      const [, value, unit] = /^(\d+)(s|m)$/.exec(String(period ?? '10s'))!;
      return Number(value) * (unit === 'm' ? 60 : 1);
    };
    for (const name of SERVICES) {
      const graceMs = shutdownGraceMs(name, composeEnvironment(services[name]!));
      expect(seconds((services[name] as { stop_grace_period?: string }).stop_grace_period) * 1000, name).toBeGreaterThanOrEqual(graceMs + SETTLE_MARGIN_MS);
    }
  });

  it('builds each service it names from that service, with the image of deploy/Dockerfile', () => {
    for (const name of SERVICES) {
      const service = services[name]!;
      expect(service, name).toBeDefined();
      expect(service.build).toMatchObject({ context: '.', dockerfile: 'deploy/Dockerfile', args: { SERVICE: name } });
      expect(existsSync(join(ROOT, `services/${name}/src/main.ts`)), name).toBe(true);
    }
    const built = Object.entries(services).filter(([, s]) => s.build?.dockerfile === 'deploy/Dockerfile');
    for (const [name, service] of built) expect(SERVICES, `${name} builds SERVICE=${service.build!.args?.SERVICE}`).toContain(service.build!.args?.SERVICE);
  });

  it.each(SERVICES)('sets for %s only variables it reads, and every one it requires', (name) => {
    const environment = composeEnvironment(services[name]!);
    const unknown = Object.keys(environment).filter((variable) => !variablesOf(name).includes(variable));
    expect(unknown, `${name} does not read these`).toEqual([]);
    expect(requiredOf(name).filter((variable) => !(variable in environment)), `${name} requires these`).toEqual([]);
  });

  it('health-checks every container, and starts each once what it depends on is healthy', () => {
    for (const [name, service] of Object.entries(services)) {
      if (!isJob(service)) expect(healthTest(service), `${name} has a healthcheck`).not.toBe('');
      const needs: Record<string, { condition?: string }> = Array.isArray(service.depends_on)
        ? Object.fromEntries(service.depends_on.map((n) => [n, {}]))
        : (service.depends_on ?? {});
      for (const [dependency, { condition }] of Object.entries(needs)) {
        expect(services[dependency], `${name} depends on ${dependency}`).toBeDefined();
        expect(condition, `${name} → ${dependency}`).toBe(isJob(services[dependency]!) ? 'service_completed_successfully' : 'service_healthy');
      }
    }
  });

  it("pins every image's tag, ours to the version of the service they run", () => {
    for (const [name, service] of Object.entries(services)) {
      expect(service.image, `${name} names its image`).toBeDefined();
      expectPinned(service.image!, name);
      const ours = SERVICES.find((s) => service.build?.args?.SERVICE === s);
      if (ours) expect(service.image, name).toBe(`oc/${ours}:${versionOf(ours)}`);
    }
  });

  it("publishes only the API beyond this machine: every other port (databases, the trace UI, metrics) is bound to 127.0.0.1", () => {
    const gatewayPort = servingPort('gateway', composeEnvironment(services.gateway!));
    const published = Object.entries(services).flatMap(([name, service]) => (service.ports ?? []).map((port) => [name, String(port)] as const));
    expect(published.map(([name]) => name)).toEqual(expect.arrayContaining(['gateway', 'eventstore', 'mongo']));
    for (const [name, port] of published) {
      if (name === 'gateway' && port === `${gatewayPort}:${gatewayPort}`) continue;
      expect(port, name).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
    }
  });

  it("probes each service where it answers (/readyz on PORT or HEALTH_PORT) and publishes the gateway's port", () => {
    for (const name of SERVICES) {
      const env = composeEnvironment(services[name]!);
      expect(healthTest(services[name]!), name).toContain(`http://127.0.0.1:${servingPort(name, env)}${PROBE_PATHS.readiness}`);
    }
    const gatewayPort = servingPort('gateway', composeEnvironment(services.gateway!));
    expect(services.gateway!.ports?.map((p) => Number(String(p).split(':').at(-1)))).toContain(gatewayPort);
  });

  it('reaches the infrastructure it names: NATS, KurrentDB, MongoDB as a replica set, Redis, the bucket, the collector and Jaeger', () => {
    const hostOf = (url: string) => new URL(url).hostname;
    for (const name of SERVICES) {
      const env = composeEnvironment(services[name]!);
      for (const variable of ['NATS_URL', 'EVENTSTORE_URL', 'MONGO_URL', 'REDIS_URL', 'OTEL_EXPORTER_OTLP_ENDPOINT', 'VIDEO_S3_ENDPOINT']) {
        if (env[variable]) expect(services[hostOf(env[variable]!)], `${name} ${variable}`).toBeDefined();
      }
      const replicaSet = env.MONGO_URL && new URL(env.MONGO_URL).searchParams.get('replicaSet');
      if (replicaSet) expect([services.mongo!.command].flat().join(' ')).toContain(`--replSet ${replicaSet}`);
    }
    // The bucket the video service uses is made on start, before the video service starts.
    const bucket = composeEnvironment(services.video!).VIDEO_S3_BUCKET;
    const maker = Object.values(services).find((s) => isJob(s) && [s.command].flat().join(' ').includes('mc mb'))!;
    expect(composeEnvironment(maker).VIDEO_S3_BUCKET).toBe(bucket);

    // Every process exports to the collector's OTLP/HTTP receiver, which sends traces on to Jaeger's.
    const collector = parse(readFileSync(join(ROOT, 'deploy/otel-collector.yaml'), 'utf8'));
    const otlpHttp = new URL(`http://${collector.receivers.otlp.protocols.http.endpoint}`);
    for (const name of SERVICES) expect(new URL(composeEnvironment(services[name]!).OTEL_EXPORTER_OTLP_ENDPOINT!).port, name).toBe(otlpHttp.port);
    const traceExporters = collector.service.pipelines.traces.exporters as string[];
    const toJaeger = traceExporters.map((e) => collector.exporters[e]?.endpoint as string | undefined).find((e) => e?.startsWith('jaeger:'));
    expect(toJaeger).toBeDefined();
    expect(services.jaeger!.ports).toContain('127.0.0.1:16686:16686');
    expect(collector.service.pipelines.metrics.receivers).toContain('otlp');
  });
});

describe('deploy/k8s', () => {
  const docs = manifests();

  it('lets every pod finish its work in flight before it is killed, and keeps the gateway serving while its endpoint is withdrawn', () => {
    for (const name of SERVICES) {
      const { workload, container } = containerOf(docs, name);
      const [command, seconds] = container.lifecycle?.preStop?.exec?.command ?? [];
      const preStopMs = command === 'sleep' ? Number(seconds) * 1000 : 0;
      // Kubernetes' own default is 30 s, counted from the start of preStop.
      const killedAfterMs = (workload.spec.template.spec.terminationGracePeriodSeconds ?? 30) * 1000;
      const graceMs = shutdownGraceMs(name, kubernetesEnvironment(docs, container));
      expect(graceMs, name).toBeGreaterThan(0);
      expect(killedAfterMs, `${name}: preStop, SHUTDOWN_GRACE_MS and a margin before the kill`).toBeGreaterThanOrEqual(preStopMs + graceMs + SETTLE_MARGIN_MS);
    }
    // A pod a Service routes to gets SIGTERM only once kube-proxy and the ingress have had time to drop it.
    const routed = docs.filter((d) => d.kind === 'Service' && (d.spec.ports ?? []).length > 0);
    expect(routed.map((s) => s.metadata.name)).toEqual(['oc-gateway']);
    for (const service of routed) {
      for (const workload of workloads(docs).filter((w) => Object.entries(service.spec.selector).every(([k, v]) => w.spec.template.metadata.labels[k] === v))) {
        for (const container of workload.spec.template.spec.containers as Container[]) {
          expect(container.lifecycle?.preStop?.exec?.command, container.name).toEqual(['sleep', expect.stringMatching(/^[1-9]\d*$/)]);
        }
      }
    }
  });
  const configMap = configMapOf(docs);
  const secrets = secretOf(docs);

  it('runs each service it names from its own image, and names no other', () => {
    const containers = workloads(docs).flatMap((w) => w.spec.template.spec.containers as Container[]);
    expect(containers.map((c) => c.name).sort()).toEqual([...SERVICES].sort());
    for (const container of containers) {
      // Pinned to the release: `latest` would move under running pods, and two pods could run two versions.
      expect(container.image).toBe(`oc/${container.name}:${versionOf(container.name)}`);
      expectPinned(container.image, container.name);
      expect(existsSync(join(ROOT, `services/${container.name}/src/main.ts`))).toBe(true);
    }
  });

  it.each(SERVICES)('gives %s every variable it reads, from the ConfigMap or the Secret, and only those', (name) => {
    const { container } = containerOf(docs, name);
    expect(container.envFrom, 'each variable is referenced by name').toBeUndefined();
    expect((container.env ?? []).map((e) => e.name).sort()).toEqual(variablesOf(name));
    for (const entry of container.env ?? []) {
      const from = entry.valueFrom;
      const sources = [entry.value !== undefined, !!from?.configMapKeyRef, !!from?.secretKeyRef, !!from?.fieldRef].filter(Boolean);
      expect(sources, entry.name).toHaveLength(1);
      if (SECRET_VARIABLES.has(entry.name)) expect(from?.secretKeyRef, `${entry.name} comes from the Secret`).toMatchObject({ name: 'oc-secrets' });
      if (from?.configMapKeyRef) {
        expect(from.configMapKeyRef.name).toBe('oc-config');
        expect(from.configMapKeyRef.key).toBe(entry.name);
        if (!from.configMapKeyRef.optional) expect(configMap, entry.name).toHaveProperty(entry.name);
      }
      if (from?.secretKeyRef) {
        expect(from.secretKeyRef.name).toBe('oc-secrets');
        if (!from.secretKeyRef.optional) expect(secrets, entry.name).toHaveProperty(from.secretKeyRef.key);
      }
    }
    // What the service cannot start without is never an optional reference.
    for (const variable of requiredOf(name)) {
      const entry = container.env!.find((e) => e.name === variable)!;
      const ref = entry.valueFrom?.configMapKeyRef ?? entry.valueFrom?.secretKeyRef;
      expect(entry.value !== undefined || (ref !== undefined && !ref.optional), `${name} requires ${variable}`).toBe(true);
    }
    // Keys of the ConfigMap are variables some service reads.
    for (const key of Object.keys(configMap)) expect(SERVICES.some((s) => variablesOf(s).includes(key)), key).toBe(true);
  });

  /** The most pods a workload may run: its replicas, or its autoscaler's maximum. */
  const scaledTo = (workload: Manifest) =>
    Math.max(
      workload.spec.replicas ?? 1,
      ...docs.filter((d) => d.kind === 'HorizontalPodAutoscaler' && d.spec.scaleTargetRef.name === workload.metadata.name).map((h) => h.spec.maxReplicas),
    );

  it('gives every service that runs several pods one event store: EVENTSTORE_URL from the Secret, not optional', () => {
    const several = SERVICES.filter((name) => variablesOf(name).includes('EVENTSTORE_URL') && scaledTo(containerOf(docs, name).workload) > 1);
    expect(several.sort()).toEqual(['billing', 'chat', 'video', 'webhook']);
    for (const name of several) {
      // Without it each pod would append to a SQLite file of its own under DATA_DIR: a log no other replica reads.
      const ref = containerOf(docs, name).container.env!.find((e) => e.name === 'EVENTSTORE_URL')!.valueFrom?.secretKeyRef;
      expect(ref, name).toEqual({ name: 'oc-secrets', key: 'EVENTSTORE_URL' });
      expect(secrets, name).toHaveProperty('EVENTSTORE_URL');
    }
  });

  it('gives gateways that run several pods one Redis to count rate limits in: REDIS_URL from the Secret, not optional', () => {
    const { workload, container } = containerOf(docs, 'gateway');
    expect(scaledTo(workload)).toBeGreaterThan(1);
    // Without it each pod would count on its own, and a key would get its limit once per pod.
    const ref = container.env!.find((e) => e.name === 'REDIS_URL')?.valueFrom?.secretKeyRef;
    expect(ref).toEqual({ name: 'oc-secrets', key: 'REDIS_URL' });
    expect(secrets).toHaveProperty('REDIS_URL');
    expect(kubernetesEnvironment(docs, container).REDIS_URL).toMatch(/^rediss?:\/\//);
  });

  it('keeps two chat replicas at least, so that one answers (and settles what the other left open) while the other restarts', () => {
    const chat = containerOf(docs, 'chat').workload;
    const autoscaler = docs.find((d) => d.kind === 'HorizontalPodAutoscaler' && d.spec.scaleTargetRef.name === chat.metadata.name);
    expect(autoscaler.spec.minReplicas).toBeGreaterThanOrEqual(2);
    expect(chat.spec.replicas).toBeGreaterThanOrEqual(2);
  });

  it.each(SERVICES)("probes %s on the code's paths and the port it answers on, with resources and a writable data directory", (name) => {
    const { workload, container } = containerOf(docs, name);
    const env = kubernetesEnvironment(docs, container);
    const port = servingPort(name, env);
    expect(container.ports?.map((p) => p.containerPort)).toContain(port);
    expect(container.readinessProbe?.httpGet?.path).toBe(PROBE_PATHS.readiness);
    expect(container.livenessProbe?.httpGet?.path).toBe(PROBE_PATHS.liveness);
    // Until it passes, liveness is not checked: a slow first start (a long log to fold) is not killed as hung.
    expect(container.startupProbe?.httpGet?.path).toBe(PROBE_PATHS.liveness);
    for (const probe of [container.readinessProbe, container.livenessProbe, container.startupProbe]) {
      expect([PROBE_PATHS.readiness, PROBE_PATHS.liveness]).toContain(probe!.httpGet?.path);
      expect(probePort(container, probe), `${name} probe port`).toBe(port);
    }
    for (const kind of ['requests', 'limits'] as const) expect(Object.keys(container.resources?.[kind] ?? {}).sort(), `${name} ${kind}`).toEqual(['cpu', 'memory']);
    expect(workload.spec.template.spec.securityContext).toMatchObject({ runAsNonRoot: true, fsGroup: 10001 });
    if (env.DATA_DIR) expect(container.volumeMounts?.map((m) => m.mountPath), `${name} mounts DATA_DIR`).toContain(env.DATA_DIR);
  });

  it('scales every service, keeps a budget for disruptions for each, and routes the Service to the API port', () => {
    const every = SERVICES.map((s) => `oc-${s}`).sort();
    const targets = docs.filter((d) => d.kind === 'HorizontalPodAutoscaler').map((h) => h.spec.scaleTargetRef);
    for (const target of targets) expect(workloads(docs).some((w) => w.kind === target.kind && w.metadata.name === target.name), target.name).toBe(true);
    expect(targets.map((t) => t.name).sort()).toEqual(every);

    const budgets = docs.filter((d) => d.kind === 'PodDisruptionBudget');
    expect(budgets.map((b) => b.metadata.name).sort()).toEqual(every);
    for (const budget of budgets) {
      const selected = workloads(docs).filter((w) =>
        Object.entries(budget.spec.selector.matchLabels).every(([k, v]) => w.spec.template.metadata.labels[k] === v),
      );
      expect(selected, budget.metadata.name).toHaveLength(1);
      // A budget that let no replica go would block node drains.
      if (budget.spec.minAvailable !== undefined) expect(budget.spec.minAvailable, budget.metadata.name).toBeLessThan(selected[0].spec.replicas);
    }

    const gatewayService = docs.find((d) => d.kind === 'Service' && d.metadata.name === 'oc-gateway');
    const { container } = containerOf(docs, 'gateway');
    expect(probePort(container, { httpGet: { path: '/', port: gatewayService.spec.ports[0].targetPort } })).toBe(
      servingPort('gateway', kubernetesEnvironment(docs, container)),
    );
  });
});

describe('deploy/Dockerfile and .dockerignore', () => {
  const dockerfile = readFileSync(join(ROOT, 'deploy/Dockerfile'), 'utf8');
  const lines = dockerfile.split('\n').filter((l) => !l.trim().startsWith('#'));
  const finalStage = lines.slice(lines.findLastIndex((l) => /^FROM\s/.test(l))).join('\n');

  it('builds in one stage and runs the built bundle with production dependencies only, as a user that owns its data directory', () => {
    expect(lines.filter((l) => /^FROM\s/.test(l)).length).toBeGreaterThanOrEqual(2);
    expect(dockerfile).toMatch(/pnpm@9\.15\.9 --filter "@oc\/\$\{SERVICE\}" deploy --prod \/out/);
    const dataDir = /DATA_DIR=(\S+)/.exec(finalStage)?.[1];
    expect(dataDir).toBeDefined();
    expect(finalStage).toContain(`chown oc:oc ${dataDir}`);
    expect(finalStage).toMatch(new RegExp(`VOLUME \\["${dataDir}"\\]`));
    const user = /^USER\s+(\S+)/m.exec(finalStage)?.[1];
    expect(user && !/^(root|0)(:|$)/.test(user)).toBe(true);
    expect(finalStage).toMatch(/CMD \["node", "--enable-source-maps", "dist\/main\.js"\]/);
    // What `pnpm deploy` copies is the package's `files`: the bundle, built by its `build` script.
    for (const name of SERVICES) {
      const pkg = JSON.parse(readFileSync(join(ROOT, `services/${name}/package.json`), 'utf8'));
      expect(pkg.files, name).toEqual(['dist']);
      expect(pkg.scripts?.build, name).toBe('tsup');
      // Workspace packages are bundled; the console's built files are read from its package at run time.
      const workspace = Object.keys(pkg.dependencies ?? {}).filter((d: string) => d.startsWith('@oc/') && d !== '@oc/dashboard');
      expect(workspace, `${name}: workspace packages are bundled`).toEqual([]);
    }
  });

  it('keeps dependencies, builds, data directories and secrets out of the build context', () => {
    const ignore = createIgnore().add(readFileSync(join(ROOT, '.dockerignore'), 'utf8'));
    for (const path of [
      'node_modules/express/index.js',
      'services/video/node_modules/x/index.js',
      'services/gateway/dist/main.js',
      '.data/events.sqlite',
      '.data/admin-token',
      'services/video/.data/webhook-secret-key',
      '.env',
      '.env.production',
      'deploy/tls/server.key',
      'deploy/tls/server.pem',
      'deploy/k8s/secrets.yaml',
      '.git/config',
    ]) {
      expect(ignore.ignores(path), path).toBe(true);
    }
    for (const path of ['package.json', 'pnpm-lock.yaml', 'pnpm-workspace.yaml', 'turbo.json', 'tsup.shared.ts', 'services/gateway/src/main.ts', 'packages/eventstore/src/eventstore-writer.mjs', 'scripts/ensure-built.mjs']) {
      expect(ignore.ignores(path), path).toBe(false);
    }
  });
});
