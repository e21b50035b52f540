import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';

const ROOT = resolve(import.meta.dirname, '../../..');
const SERVICES = ['gateway', 'billing', 'chat', 'video', 'webhook'];

/** Values of the right form for what the deployment files leave to the operator's secrets. */
const SECRET_VALUES: Record<string, string> = {
  ADMIN_TOKEN: 'a'.repeat(32),
  WEBHOOK_SECRET_KEY: Buffer.alloc(32, 7).toString('base64'),
};
const secret = (name: string) => SECRET_VALUES[name] ?? 'operator-supplied';

/** docker compose's `${VAR:?message}` and `${VAR:-default}`, as the operator's shell would fill them. */
const interpolate = (value: unknown) =>
  String(value).replace(/\$\{(\w+)(?::([?-])([^}]*))?\}/g, (_, name: string, kind?: string, rest?: string) =>
    kind === '-' ? rest! : secret(name),
  );

function composeEnvironments(): Record<string, Record<string, string>> {
  const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
    services: Record<string, { environment?: Record<string, unknown> }>;
  };
  return Object.fromEntries(
    SERVICES.map((name) => [
      name,
      Object.fromEntries(Object.entries(compose.services[name]?.environment ?? {}).map(([k, v]) => [k, interpolate(v)])),
    ]),
  );
}

function kubernetesEnvironments(): Record<string, Record<string, string>> {
  const dir = join(ROOT, 'deploy/k8s');
  const documents = readdirSync(dir)
    .filter((file) => file.endsWith('.yaml'))
    .flatMap((file) => parseAllDocuments(readFileSync(join(dir, file), 'utf8')).map((doc) => doc.toJS() as any));
  const configMap = documents.find((d) => d?.kind === 'ConfigMap' && d.metadata.name === 'oc-config').data as Record<string, string>;
  const secrets = documents.find((d) => d?.kind === 'Secret' && d.metadata.name === 'oc-secrets').stringData as Record<string, string>;
  const environments: Record<string, Record<string, string>> = {};
  for (const workload of documents.filter((d) => d?.kind === 'Deployment' || d?.kind === 'StatefulSet')) {
    for (const container of workload.spec.template.spec.containers) {
      const env: Record<string, string> = {};
      for (const source of container.envFrom ?? []) {
        if (source.configMapRef?.name === 'oc-config') Object.assign(env, configMap);
        if (source.secretRef?.name === 'oc-secrets') for (const name of Object.keys(secrets)) env[name] = secret(name);
      }
      for (const entry of container.env ?? []) env[entry.name] = entry.value ?? `from-${entry.valueFrom ? 'field' : 'nothing'}`;
      environments[container.name] = env;
    }
  }
  return environments;
}

/** The process's own verdict on an environment: `OC_CHECK_CONFIG=1` parses it as at boot and starts nothing. */
async function checkConfiguration(service: string, env: Record<string, string>, dataDir: string) {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, `services/${service}/src/main.ts`)], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: join(dataDir, service), ...env, OC_CHECK_CONFIG: '1' },
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
