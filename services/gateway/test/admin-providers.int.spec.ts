import 'reflect-metadata';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createBilling } from '@oc/billing';
import { type DeploymentStatus, ManualClock, ok, type ServedUsage, sortableIds, Subjects, unwrap, UsageReportSchema } from '@oc/contracts';
import { openSqliteStores } from '@oc/eventstore';
import { InProcessBroker, InProcessServerStrategy, InProcessServiceClient } from '@oc/messaging';
import { SqliteReadModelStore } from '@oc/readmodel';
import { createLogger } from '@oc/telemetry';
import { NestFactory } from '@nestjs/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyAuthenticator } from '../src/application/authenticator';
import { KeyUsageRecorder } from '../src/application/key-usage';
import { RateLimits } from '../src/application/rate-limits';
import { adminRoutes } from '../src/transport/admin-routes';
import { createGatewayApp } from '../src/transport/http';
import { HttpServerConfigSchema, listenHttp } from '../src/transport/http-server';

const ADMIN_TOKEN = 'admin-token-for-tests';
const clock = new ManualClock(Date.UTC(2026, 10, 22, 12));
const stores = openSqliteStores({ filename: ':memory:', clock });
const broker = new InProcessBroker();
const services = new InProcessServiceClient(broker);
let server: Server;
let url: string;
let closeAll: () => Promise<void>;

const deployment = (model: string, id: string, provider: string, upstream_model: string): DeploymentStatus => ({
  object: 'deployment',
  model,
  id,
  provider,
  upstream_model,
  circuit: 'closed',
  success_rate: 1,
  calls: 12,
  failures: 0,
  latency_ms: { p50: 180, p99: 950 },
  in_flight: 2,
  retry_after_until: null,
});
const chatDeployments = [deployment('chat-2', 'chat-2-openai', 'openai', 'gpt-4o-mini'), deployment('chat-2', 'chat-2-simulator', 'simulator', 'simulator')];
const videoDeployments = [{ ...deployment('video-2', 'video-2-fal', 'fal', 'fal-ai/veo3'), circuit: 'open' as const, success_rate: 0.25 }];

/** Stand-ins for the chat and video services; a test may change chat's answer, or stop video answering. */
let chatAnswer: unknown = ok({ object: 'list', data: chatDeployments });
const answerVideo = () => broker.respond(Subjects.video.deployments, async () => ok({ object: 'list', data: videoDeployments }));
let stopVideo: () => void;

beforeAll(async () => {
  const billing = await createBilling({
    eventStore: stores.store,
    readModels: new SqliteReadModelStore({ filename: ':memory:' }),
    client: services,
    clock,
    ids: sortableIds,
    logger: createLogger({ service: 'billing-test', level: 'silent' }),
  });
  const billingApp = await NestFactory.createMicroservice(billing.module, { strategy: new InProcessServerStrategy(broker), logger: false });
  await billingApp.listen();
  broker.respond(Subjects.chat.deployments, async () => chatAnswer);
  stopVideo = answerVideo();
  const app = createGatewayApp({
    services,
    authenticator: new KeyAuthenticator(services, clock),
    limits: RateLimits.inMemory(),
    usage: new KeyUsageRecorder(services, clock),
    clock,
    logger: createLogger({ service: 'gateway-test', level: 'silent' }),
    adminToken: ADMIN_TOKEN,
    version: '1.2.3',
    v1: [],
    admin: adminRoutes(),
    ready: async () => undefined,
  });
  server = await listenHttp(app, 0, '127.0.0.1', HttpServerConfigSchema.parse({}));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  closeAll = async () => {
    server.close();
    await billingApp.close();
    await billing.close();
    await stores.close();
  };
});
afterAll(() => closeAll());

const get = async (path: string, token = ADMIN_TOKEN) => {
  const res = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${token}` } });
  return { status: res.status, body: (await res.json()) as any };
};

describe('GET /admin/v1/providers', () => {
  it("lists chat's deployments, then video's, as the services report them", async () => {
    const res = await get('/admin/v1/providers');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ object: 'list', data: [...chatDeployments, ...videoDeployments] });
  });

  it('answers 503 when either service does not answer, rather than a list missing its deployments', async () => {
    stopVideo();
    try {
      const res = await get('/admin/v1/providers');
      expect(res.status).toBe(503);
      expect(res.body).toEqual({ error: { type: 'service_unavailable_error', code: 'service_unavailable', message: expect.any(String) } });
    } finally {
      stopVideo = answerVideo();
    }
  });

  it('hides an answer that breaks the contract behind a 500', async () => {
    chatAnswer = ok({ object: 'list', data: [{ id: 'half a deployment' }] });
    try {
      const res = await get('/admin/v1/providers');
      expect(res.status).toBe(500);
      expect(res.body.error).toMatchObject({ type: 'api_error', code: 'internal_error' });
    } finally {
      chatAnswer = ok({ object: 'list', data: chatDeployments });
    }
  });

  it('is for the admin token only', async () => {
    const res = await get('/admin/v1/providers', 'oc_live_not-an-admin-token');
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('invalid_admin_token');
  });
});

describe('GET /admin/v1/usage', () => {
  let acme: string;
  let globex: string;
  const served = (deployment: string, provider: string, provider_cost_micros: number, tokens = 100): ServedUsage => ({
    product: 'chat',
    model: 'chat-2',
    deployment,
    provider,
    upstream_model: provider === 'simulator' ? 'simulator' : 'gpt-4o-mini',
    input_tokens: tokens,
    output_tokens: tokens * 2,
    provider_cost_micros,
  });
  let captures = 0;
  const capture = async (org_id: string, amount_micros: number, usage: ServedUsage) => {
    const reservation_id = `r_${++captures}`;
    unwrap(await services.request(Subjects.billing.reserveFunds, { org_id, reservation_id, amount_micros: 1_000_000, description: 'chat' }));
    unwrap(await services.request(Subjects.billing.captureReservation, { org_id, reservation_id, amount_micros, usage }));
  };

  beforeAll(async () => {
    const org = async (name: string) => {
      const { id } = unwrap(await services.request<{ id: string }>(Subjects.billing.createOrganization, { name, tier: 'standard' }));
      unwrap(await services.request(Subjects.billing.addCredits, { org_id: id, amount_micros: 10_000_000, description: 'Top-up' }));
      return id;
    };
    acme = await org('Acme');
    globex = await org('Globex');
    await capture(acme, 123_457, served('chat-2-openai', 'openai', 100_000));
    await capture(acme, 10, served('chat-2-simulator', 'simulator', 0));
    await capture(globex, 200_000, served('chat-2-openai', 'openai', 150_001));
  });

  it("answers billing's report in USD, grouped by model and provider over the last 30 days unless asked otherwise", async () => {
    const res = await get('/admin/v1/usage');
    expect(res.status).toBe(200);
    expect(UsageReportSchema.parse(res.body)).toEqual({
      object: 'usage_report',
      start: '2026-10-24',
      end: '2026-11-22',
      group_by: ['model', 'provider'],
      data: [
        { model: 'chat-2', provider: 'openai', requests: 2, input_tokens: 200, output_tokens: 400, seconds: 0, revenue: 0.323457, provider_cost: 0.250001, margin: 0.073456 },
        { model: 'chat-2', provider: 'simulator', requests: 1, input_tokens: 100, output_tokens: 200, seconds: 0, revenue: 0.00001, provider_cost: 0, margin: 0.00001 },
      ],
      has_more: false,
      next_after: null,
    });
  });

  it('takes the groups, the days and one organization from the query', async () => {
    const res = await get(`/admin/v1/usage?group_by=deployment,day&start=2026-11-22&end=2026-11-22&org_id=${acme}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ start: '2026-11-22', end: '2026-11-22', group_by: ['deployment', 'day'] });
    expect(res.body.data.map((r: any) => [r.deployment, r.day, r.revenue])).toEqual([
      ['chat-2-openai', '2026-11-22', 0.123457],
      ['chat-2-simulator', '2026-11-22', 0.00001],
    ]);
  });

  it('refuses a bad query with 400 naming the parameter, and an unknown organization with 404', async () => {
    const refusal = async (query: string) => {
      const res = await get(`/admin/v1/usage?${query}`);
      return [res.status, res.body.error.code, res.body.error.param];
    };
    expect(await refusal('group_by=model,organization')).toEqual([400, 'invalid_parameter', 'group_by']);
    expect(await refusal('start=22-11-2026')).toEqual([400, 'invalid_parameter', 'start']);
    expect(await refusal('start=2026-11-22&end=2026-11-01')).toEqual([400, 'invalid_parameter', 'end']);
    expect(await refusal('start=2025-01-01&end=2026-01-02')).toEqual([400, 'invalid_parameter', 'start']);
    expect(await refusal('org=acme')).toEqual([400, 'unknown_parameter', 'org']);
    expect(await refusal('org_id=org_nobody')).toEqual([404, 'resource_not_found', undefined]);
  });
});

describe('the OpenAPI document', () => {
  it('documents both operations, with the usage query and the answers’ schemas', async () => {
    const doc = (await (await fetch(`${url}/openapi.json`)).json()) as any;
    const providers = doc.paths['/admin/v1/providers'].get;
    expect(providers.security).toEqual([{ adminToken: [] }]);
    expect(providers.responses['200'].content['application/json'].schema.properties.data.items.required).toContain('circuit');
    const usage = doc.paths['/admin/v1/usage'].get;
    expect(usage.parameters.map((p: { name: string }) => p.name)).toEqual(['start', 'end', 'group_by', 'org_id', 'limit', 'after', 'format']);
    expect(usage.responses['200'].content['application/json'].schema.properties.data.items.required).toEqual(
      expect.arrayContaining(['requests', 'revenue', 'provider_cost', 'margin']),
    );
    expect(Object.keys(usage.responses)).toContain('404');
  });
});
