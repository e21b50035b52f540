import { telemetry } from './telemetry';
import 'reflect-metadata';
import { EXIT_CORRUPT_LOG, EventLogCorruptError, privateFiles } from '@oc/eventstore';
import { configFromEnv } from '@oc/contracts';
import { webhookMode, webhookModeLine } from '@oc/webhook';
import { STANDALONE_CONFIG_CHECKS, STANDALONE_WEBHOOK_MODE, StandaloneConfigSchema } from './config';
import { startStandalone } from './standalone';
import { version } from './version';

privateFiles();
const config = configFromEnv(StandaloneConfigSchema, process.env, STANDALONE_CONFIG_CHECKS);
// A server's first start makes no organization nor key of its own: a key printed to a terminal ends up in logs.
const production = config.NODE_ENV === 'production';
const app = await startStandalone({ config, demo: !production }).catch((error: unknown) => {
  if (!(error instanceof EventLogCorruptError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exit(EXIT_CORRUPT_LOG);
});

const lines = [
  `OC API ${version} listening on ${app.url} (embedded mode; data in ${config.DATA_DIR})`,
  webhookModeLine(webhookMode(config, STANDALONE_WEBHOOK_MODE), config.WEBHOOK_ALLOW_PRIVATE === '1'),
  app.adminTokenGenerated
    ? `Admin token (generated, kept in ${app.adminTokenFile}): ${app.adminToken}`
    : app.adminTokenFile
      ? `Admin token: in ${app.adminTokenFile}`
      : 'Admin token: from ADMIN_TOKEN',
  `Web console: ${app.url}/dashboard/ (operators sign in with the admin token; oc members create adds an organization's members)`,
];
if (app.demo) {
  lines.push(
    `Demo organization ${app.demo.organization.id} with $10.00 of credit, and an API key with every scope (shown only now):`,
    `  ${app.demo.key}`,
    `Try it:`,
    `  curl -s ${app.url}/v1/account/balance -H "Authorization: Bearer ${app.demo.key}"`,
  );
} else if (app.firstStart) {
  const login = app.adminTokenFile ? `oc login --url ${app.url} --token - < ${app.adminTokenFile}` : `printenv ADMIN_TOKEN | oc login --url ${app.url} --token -`;
  const bearer = `Authorization: Bearer ${app.adminTokenFile ? `$(cat ${app.adminTokenFile})` : '$ADMIN_TOKEN'}`;
  lines.push(
    'No demo organization nor key under NODE_ENV=production. Create an organization and an API key with the admin token, with the CLI:',
    `  ${login}`,
    '  oc orgs create --name Acme --tier standard',
    '  oc keys create org_… --name backend --scope video:read --scope video:write',
    'or with the admin API:',
    `  curl -s ${app.url}/admin/v1/organizations -H "${bearer}" -H "Content-Type: application/json" -d '{"name":"Acme","tier":"standard"}'`,
    `  curl -s ${app.url}/admin/v1/organizations/org_…/keys -H "${bearer}" -H "Content-Type: application/json" -d '{"name":"backend","scopes":["video:read","video:write"]}'`,
  );
}
process.stdout.write(`${lines.join('\n')}\n`);

let stopping: Promise<void> | undefined;
const stop = async () => {
  await app.close(config.SHUTDOWN_GRACE_MS);
  await telemetry.shutdown();
  process.exit(0);
};
// One stop, whichever signal comes first; the same signal again ends the process at once, as by default.
const shutdown = () => void (stopping ??= stop());
process.once('SIGINT', shutdown);
process.once('SIGTERM', shutdown);
