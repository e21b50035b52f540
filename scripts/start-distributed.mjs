// `pnpm start:distributed`: gateway, billing, chat, video and webhook as separate processes over NATS, on
// one shared event store file, with `pnpm start`'s variables, defaults and first-start conveniences.
// `REPLICAS=2` starts two of each: two gateways (on PORT and PORT + 1, sharing rate limits in REDIS_URL's Redis,
// which is then required) and two replicas of every service.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';

const root = resolve(import.meta.dirname, '..');
const SERVICES = ['billing', 'chat', 'video', 'webhook', 'gateway'];

const env = process.env;
const dataDir = resolve(env.DATA_DIR ?? './.data');
const port = Number(env.PORT ?? 8080);
const host = env.HOST ?? '0.0.0.0';
const local = `http://127.0.0.1:${port}`;
const replicas = Number(env.REPLICAS ?? 1);
if (!Number.isInteger(replicas) || replicas < 1 || replicas > 8) {
  process.stderr.write(`Invalid configuration: REPLICAS: a whole number from 1 to 8 (got '${env.REPLICAS}')\n`);
  process.exit(78);
}
// Gateways counting on their own would each let a key's whole limit through: n gateways, n times the limit.
if (replicas > 1 && !env.REDIS_URL) {
  process.stderr.write(
    `Invalid configuration: REDIS_URL: required when REPLICAS is more than 1, so that the ${replicas} gateways count rate limits together (e.g. redis://127.0.0.1:6379)\n`,
  );
  process.exit(78);
}
const gateways = Array.from({ length: replicas }, (_, i) => `http://127.0.0.1:${port + i}`);

execFileSync(process.execPath, [join(root, 'scripts/ensure-built.mjs'), 'services/dashboard', ...SERVICES.map((s) => `services/${s}`)], {
  stdio: 'inherit',
});
mkdirSync(dataDir, { recursive: true, mode: 0o700 });

/**
 * As `pnpm start` decides it (`webhookMode` in services/webhook/src/config.ts): WEBHOOK_MODE when set, else
 * production under NODE_ENV=production, else development (a developer's machine). Said first, before anything starts.
 */
const webhookMode = env.WEBHOOK_MODE
  ? { mode: env.WEBHOOK_MODE, because: `WEBHOOK_MODE=${env.WEBHOOK_MODE}` }
  : env.NODE_ENV === 'production'
    ? { mode: 'production', because: 'NODE_ENV=production' }
    : { mode: 'development', because: 'the default without NODE_ENV=production' };
process.stdout.write(
  webhookMode.mode === 'development'
    ? `Webhooks: development mode (${webhookMode.because}): WEBHOOK_ALLOW_PRIVATE=1 lets deliveries reach http:// and loopback receivers; on a server, set NODE_ENV=production or WEBHOOK_MODE=production\n`
    : `Webhooks: ${webhookMode.mode} mode (${webhookMode.because}): deliveries reach public https:// addresses only\n`,
);

/** As `pnpm start`: ADMIN_TOKEN if set, else the one kept in DATA_DIR, else a new one kept there. */
function adminToken() {
  if (env.ADMIN_TOKEN) return { token: env.ADMIN_TOKEN, note: 'Admin token: from ADMIN_TOKEN' };
  const file = join(dataDir, 'admin-token');
  try {
    return { token: readFileSync(file, 'utf8').trim(), file, note: `Admin token: in ${file}` };
  } catch {
    const token = `oc_admin_${randomBytes(32).toString('base64url')}`;
    writeFileSync(file, `${token}\n`, { mode: 0o600 });
    return { token, file, note: `Admin token (generated, kept in ${file}): ${token}` };
  }
}
const admin = adminToken();

/**
 * As `pnpm start`: in development mode, WEBHOOK_SECRET_KEY if set, else the key kept in
 * `$DATA_DIR/webhook-secret-key` (the file `pnpm start` keeps), else a new one kept there, so that webhooks
 * created under either command are delivered under the other. In production mode the webhook process
 * requires WEBHOOK_SECRET_KEY itself.
 */
function webhookSecretKey() {
  if (env.WEBHOOK_SECRET_KEY || webhookMode.mode !== 'development') return {};
  const file = join(dataDir, 'webhook-secret-key');
  // Where this command kept the key before: moved, so that the webhooks sealed with it stay deliverable.
  const earlier = join(dataDir, 'webhook', 'webhook-secret-key');
  if (existsSync(earlier)) {
    if (!existsSync(file)) renameSync(earlier, file);
    else if (readFileSync(earlier, 'utf8') !== readFileSync(file, 'utf8')) {
      process.stderr.write(
        `[start:distributed] using the webhook secret key in ${file}; webhooks created by an earlier start:distributed were sealed with ${earlier} and cannot be delivered: create them again\n`,
      );
    }
  }
  try {
    return { WEBHOOK_SECRET_KEY: readFileSync(file, 'utf8').trim() };
  } catch {
    const key = randomBytes(32).toString('base64');
    writeFileSync(file, `${key}\n`, { mode: 0o600, flag: 'wx' });
    return { WEBHOOK_SECRET_KEY: key };
  }
}
const webhookKey = webhookSecretKey();

// Every variable the caller set reaches every process; these are the distributed layout's own. Replica
// names are this script's to give (one per process), so none set outside reaches two processes.
const { REPLICA_ID: _replicaId, CHAT_REPLICA_ID: _chatReplicaId, ...inherited } = env;
const common = {
  // As `pnpm start` sets it (docs/reliability.md, Memory); a value of the caller's own wins.
  MALLOC_ARENA_MAX: '2',
  ...inherited,
  NATS_URL: env.NATS_URL ?? 'nats://127.0.0.1:4222',
  EVENTSTORE_FILE: env.EVENTSTORE_FILE ?? join(dataDir, 'events.sqlite'),
  // The webhook process's own default is production: development (the key generated, this machine reachable
  // with WEBHOOK_ALLOW_PRIVATE=1) has to be passed on.
  WEBHOOK_MODE: webhookMode.mode,
};

/**
 * Replica `n` (1-based) of a service: its own name, and the service's data directory shared with its other
 * replicas (video files, and the read models that one of them projects and all of them read).
 */
function processEnv(service, n) {
  if (service === 'gateway') {
    return {
      ...common,
      DATA_DIR: join(dataDir, service),
      PORT: String(port + n - 1),
      HOST: host,
      ADMIN_TOKEN: admin.token,
    };
  }
  return {
    ...common,
    DATA_DIR: join(dataDir, service),
    REPLICA_ID: `${service}-${n}`,
    ...(service === 'webhook' ? webhookKey : {}),
    ...(service === 'video' ? { PUBLIC_BASE_URL: env.PUBLIC_BASE_URL ?? local } : {}),
    // The rendered clips are shared: one replica renders them ahead, the others on demand.
    ...(service === 'video' && n > 1 && env.SIM_VIDEO_PRERENDER === undefined ? { SIM_VIDEO_PRERENDER: '0' } : {}),
  };
}

const children = new Map();
let stopping = false;

const LEVELS = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const pad = (n, width = 2) => String(n).padStart(width, '0');

/**
 * A pino line as a person reads it in a terminal: local time, level, message, then the other fields as
 * `name=value` and an error's stack below. LOG_FORMAT=json keeps the lines as the processes wrote them, for
 * a log collector; a line that is not pino's (a configuration error, a Node warning) is shown as it is.
 */
function readable(line) {
  if (env.LOG_FORMAT === 'json' || !line.startsWith('{')) return [line];
  let entry;
  try {
    entry = JSON.parse(line);
  } catch {
    return [line];
  }
  const { level, time, msg, err, pid: _pid, hostname: _hostname, service: _service, ...fields } = entry;
  const at = new Date(time);
  const clock = `${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}.${pad(at.getMilliseconds(), 3)}`;
  const rest = Object.entries(fields).map(([k, v]) => `${k}=${typeof v === 'string' && !/\s/.test(v) ? v : JSON.stringify(v)}`);
  const head = [clock, LEVELS[level] ?? level, msg ?? '', ...rest].filter((part) => part !== '').join(' ');
  return [head, ...(err ? String(err.stack ?? `${err.type}: ${err.message}`).split('\n').map((l) => `    ${l}`) : [])];
}

function prefixed(stream, name, out) {
  createInterface({ input: stream }).on('line', (line) => {
    for (const shown of readable(line)) out.write(`[${name}] ${shown}\n`);
  });
}

for (const service of SERVICES) {
  for (let n = 1; n <= replicas; n++) {
    const name = replicas > 1 ? `${service}-${n}` : service;
    // A process group of its own: Ctrl-C in a terminal signals the whole foreground group, and each process
    // would start shutting down on that SIGINT and again on this script's SIGTERM. Only this script stops them.
    const child = spawn(process.execPath, ['--enable-source-maps', join(root, 'services', service, 'dist/main.js')], {
      cwd: root,
      env: processEnv(service, n),
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    prefixed(child.stdout, name, process.stdout);
    prefixed(child.stderr, name, process.stderr);
    children.set(name, { service, child });
    // A service with no process left answers 503 for good: stop everything and say which. While another
    // replica of it runs, the others carry on (and take over what the stopped one left unfinished).
    child.on('exit', (code, signal) => {
      children.delete(name);
      if (stopping) return;
      const left = [...children.values()].filter((c) => c.service === service).length;
      const how = signal ?? `exit code ${code}`;
      if (left > 0) {
        process.stderr.write(`[start:distributed] ${name} stopped (${how}); ${left} ${service} replica${left > 1 ? 's' : ''} still running\n`);
        return;
      }
      process.stderr.write(`[start:distributed] ${name} stopped (${how}); stopping the others\n`);
      void stop(1);
    });
  }
}

/**
 * Stops every process once; a second Ctrl-C (or any signal) while they close waits for the same. Each lets its
 * work in flight finish (SHUTDOWN_GRACE_MS) before it exits, and billing goes last: what the others finish
 * meanwhile (a chat stream's charge) is settled with it.
 */
let stopped;
function stop(code) {
  stopping = true;
  const signalled = (which) => {
    const group = [...children.values()].filter(which);
    const exits = group.map(({ child }) => new Promise((r) => child.once('exit', r)));
    for (const { child } of group) child.kill('SIGTERM');
    return Promise.all(exits);
  };
  stopped ??= (async () => {
    await signalled(({ service }) => service !== 'billing');
    await signalled(({ service }) => service === 'billing');
    process.exit(code);
  })();
  return stopped;
}
process.on('SIGINT', () => void stop(0));
process.on('SIGTERM', () => void stop(0));
// The terminal closed: in groups of their own, the processes would not hear of it.
process.on('SIGHUP', () => void stop(0));
// Started by another process over IPC (the e2e suites): when that one goes away, even killed, so does all this.
if (process.send) process.once('disconnect', () => void stop(0));

async function ready() {
  for (let attempt = 0; attempt < 600 && !stopping; attempt++) {
    try {
      const answers = await Promise.all(gateways.map((url) => fetch(`${url}/readyz`)));
      if (answers.every((res) => res.status === 200)) return true;
    } catch {
      // Not listening yet.
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return false;
}

const callAdmin = async (method, path, body) => {
  const res = await fetch(`${local}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const json = await res.json();
  if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
};

const noOrganizationYet = async () => (await callAdmin('GET', '/organizations?limit=1')).data.length === 0;

/** `pnpm start`'s demo: one organization with credit and a key. */
async function createDemo() {
  const organization = await callAdmin('POST', '/organizations', { name: 'Demo', tier: 'standard' });
  await callAdmin('POST', `/organizations/${organization.id}/credits`, { amount: 10, description: 'Demo credit' });
  const scopes = ['video:read', 'video:write', 'video:delete', 'chat:read', 'chat:write', 'text:write', 'webhook:read', 'webhook:write', 'webhook:delete'];
  const key = await callAdmin('POST', `/organizations/${organization.id}/keys`, { name: 'Demo key', scopes });
  return { organization, key: key.key };
}

if (!(await ready())) {
  if (!stopping) {
    process.stderr.write(`[start:distributed] the gateway${replicas > 1 ? 's' : ''} did not become ready in 120 s; stopping\n`);
    await stop(1);
  }
} else {
  const firstStart = await noOrganizationYet();
  // As `pnpm start`: a server's first start makes no organization nor key, whose key its logs would keep.
  const demo = firstStart && env.NODE_ENV !== 'production' ? await createDemo() : undefined;
  const what = replicas > 1 ? `distributed: ${replicas} of each of ${SERVICES.join(', ')}` : `distributed: ${SERVICES.join(', ')}`;
  const lines = [
    `OC API listening on ${gateways.join(' and ')} (${what} over ${common.NATS_URL}; data in ${dataDir})`,
    admin.note,
    `Web console: ${local}/dashboard/ (operators sign in with the admin token; oc members create adds an organization's members)`,
  ];
  if (demo) {
    lines.push(
      `Demo organization ${demo.organization.id} with $10.00 of credit, and an API key with every scope (shown only now):`,
      `  ${demo.key}`,
      'Try it:',
      `  curl -s ${local}/v1/account/balance -H "Authorization: Bearer ${demo.key}"`,
    );
  } else if (firstStart) {
    const login = admin.file ? `oc login --url ${local} --token - < ${admin.file}` : `printenv ADMIN_TOKEN | oc login --url ${local} --token -`;
    const bearer = `Authorization: Bearer ${admin.file ? `$(cat ${admin.file})` : '$ADMIN_TOKEN'}`;
    lines.push(
      'No demo organization nor key under NODE_ENV=production. Create an organization and an API key with the admin token, with the CLI:',
      `  ${login}`,
      '  oc orgs create --name Acme --tier standard',
      '  oc keys create org_… --name backend --scope video:read --scope video:write',
      'or with the admin API:',
      `  curl -s ${local}/admin/v1/organizations -H "${bearer}" -H "Content-Type: application/json" -d '{"name":"Acme","tier":"standard"}'`,
      `  curl -s ${local}/admin/v1/organizations/org_…/keys -H "${bearer}" -H "Content-Type: application/json" -d '{"name":"backend","scopes":["video:read","video:write"]}'`,
    );
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}
