import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DomainError, fail, ManualClock, ok, sortableIds, type Reply, serviceUnavailable, Subjects, toApiError, type Video } from '@oc/contracts';
import { openSqliteStores } from '@oc/eventstore';
import type { ServiceClient } from '@oc/messaging';
import { SqliteReadModelStore } from '@oc/readmodel';
import { createLogger } from '@oc/telemetry';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { FfmpegRenderer } from '../src/adapters/ffmpeg-renderer';
import { ClockScheduler } from '../src/adapters/scheduler';
import { createVideo } from '../src/app';
import { VideoConfigSchema } from '../src/config';
import { startFakeS3 } from './fake-s3';
import { startFakeUpstream } from './fake-upstream';
import { solidPng } from './png';
import { expectedPresignedSignature } from './sigv4';

/** Billing as the video service sees it: reservations idempotent on their id, with failures on demand. */
class FakeBilling {
  readonly reserved = new Map<string, number>();
  readonly captures: string[] = [];
  /** What each capture recorded of the deployment that served it. */
  readonly usages = new Map<string, unknown>();
  readonly releases: string[] = [];
  unavailableCaptures = 0;
  /** Captures refused because billing already let the hold expire (and gave the funds back). */
  lapsedCaptures = 0;
  readonly refusedCaptures: string[] = [];
  /** Reserve, then never answer: the video service dies before it hears back. */
  hangingReserves = 0;

  async request<T>(subject: string, payload: any): Promise<Reply<T>> {
    const id = payload.reservation_id as string;
    switch (subject) {
      case Subjects.billing.reserveFunds:
        this.reserved.set(id, payload.amount_micros);
        if (this.hangingReserves > 0) {
          this.hangingReserves--;
          return new Promise(() => undefined);
        }
        return ok({ reservation_id: id } as T);
      case Subjects.billing.captureReservation:
        if (this.unavailableCaptures > 0) {
          this.unavailableCaptures--;
          return fail(serviceUnavailable());
        }
        if (this.lapsedCaptures > 0) {
          this.refusedCaptures.push(id);
          this.reserved.delete(id);
          return fail(toApiError(new DomainError({ kind: 'Conflict', code: 'reservation_expired', message: `Reservation '${id}' expired.` })));
        }
        if (this.reserved.delete(id)) {
          this.captures.push(id);
          this.usages.set(id, payload.usage);
        }
        return ok({ reservation_id: id } as T);
      case Subjects.billing.releaseReservation:
        if (this.reserved.delete(id)) this.releases.push(id);
        return ok({ reservation_id: id } as T);
      default:
        throw new Error(`unexpected subject ${subject}`);
    }
  }
}

const API_KEY = 'sk-upstream-test';
const T0 = Date.UTC(2026, 10, 22, 12);
const logger = createLogger({ service: 'video-test', level: 'silent' });
const request = { org_id: 'org_1', mode: 'live' as const, model: 'video-2' as const, prompt: 'A lighthouse in a storm', seconds: '4' as const, size: '1280x720' as const };

describe('video jobs against an OpenAI-compatible upstream', () => {
  let mp4: Buffer;
  let upstream: Awaited<ReturnType<typeof startFakeUpstream>>;
  let stores: ReturnType<typeof openSqliteStores>;
  let billing: FakeBilling;
  let clock: ManualClock;
  let dataDir: string;
  let running: { video: Awaited<ReturnType<typeof createVideo>>; scheduler: ClockScheduler } | undefined;

  let rendersDir: string;
  beforeAll(async () => {
    rendersDir = await mkdtemp(join(tmpdir(), 'oc-video-renders-'));
    const renderer = new FfmpegRenderer({ cacheDir: rendersDir });
    mp4 = await readFile((await renderer.clip('1280x720', '4')).video);
    await renderer.close();
    upstream = await startFakeUpstream(API_KEY, mp4);
  });
  afterAll(async () => {
    await upstream.close();
    await rm(rendersDir, { recursive: true, force: true });
  });
  beforeEach(async () => {
    stores = openSqliteStores({ filename: ':memory:' });
    billing = new FakeBilling();
    clock = new ManualClock(T0);
    dataDir = await mkdtemp(join(tmpdir(), 'oc-video-int-'));
  });
  afterEach(async () => {
    await running?.video.close();
    running = undefined;
    await stores.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  /** A video service "process" on the shared store; its scheduler runs only when the test says so. */
  async function start(env: Record<string, string> = {}) {
    await running?.video.close();
    const scheduler = new ClockScheduler(clock, () => undefined, 3_600_000);
    const video = await createVideo({
      eventStore: stores.store,
      readModels: new SqliteReadModelStore({ filename: ':memory:' }),
      client: billing as unknown as ServiceClient,
      clock,
      ids: sortableIds,
      logger,
      config: VideoConfigSchema.parse({
        VIDEO_PROVIDER: 'openai',
        VIDEO_UPSTREAM_BASE_URL: upstream.url,
        VIDEO_UPSTREAM_API_KEY: API_KEY,
        VIDEO_RETRY_MS: '1000',
        SIM_VIDEO_PRERENDER: '0',
        ...env,
      }),
      publicBaseUrl: 'https://api.example.com',
      dataDir,
      scheduler,
    });
    running = { video, scheduler };
    await video.listening();
    return video;
  }
  /** Runs what is due, and what that makes due at the same instant. */
  const runDue = async () => {
    for (let i = 0; i < 4; i++) await running!.scheduler.runDue();
  };
  const retrieve = (id: string) => running!.video.service.get({ org_id: 'org_1', video_id: id });
  const upstreamJob = () => [...upstream.jobs.values()].at(-1)!;

  it('creates upstream as multipart with the mapped model, polls no faster than configured, maps progress, and fetches the file', async () => {
    const { service } = await start();
    const created = await service.create(request);
    expect(billing.reserved.get(created.id)).toBe(400_000);
    await runDue();
    const job = upstreamJob();
    expect(job).toMatchObject({ model: 'sora-2', prompt: request.prompt, seconds: '4', size: '1280x720' });
    expect(upstream.requests.find((r) => r.method === 'POST')!.contentType).toMatch(/^multipart\/form-data; boundary=/);
    expect((await retrieve(created.id)).status).toBe('in_progress');

    job.status = 'in_progress';
    job.progress = 37;
    const polls = () => upstream.requests.filter((r) => r.method === 'GET').length;
    clock.advance(4_999);
    await runDue();
    expect(polls()).toBe(0);
    clock.advance(1);
    await runDue();
    expect(polls()).toBe(1);
    expect(await retrieve(created.id)).toMatchObject({ status: 'in_progress', progress: 37 });

    job.status = 'completed';
    job.progress = 100;
    clock.advance(5_000);
    await runDue();
    const video: Video = await retrieve(created.id);
    expect(video).toMatchObject({ status: 'completed', progress: 100, url: `https://api.example.com/v1/videos/${created.id}/content/temporary` });
    expect(billing.captures).toEqual([created.id]);
    const content = await service.readContent({ org_id: 'org_1', video_id: created.id, variant: 'video', copy: 'current', offset: 0, length: 100 });
    expect(Buffer.from(content.data, 'base64')).toEqual(mp4.subarray(0, 100));
  });

  it('maps an upstream moderation failure to content_policy_violation and releases the reservation', async () => {
    const { service } = await start();
    const created = await service.create(request);
    await runDue();
    Object.assign(upstreamJob(), { status: 'in_progress', progress: 45 });
    clock.advance(5_000);
    await runDue();
    Object.assign(upstreamJob(), { status: 'failed', error: { code: 'moderation_blocked', message: 'Blocked by moderation.' } });
    clock.advance(5_000);
    await runDue();
    expect(await retrieve(created.id)).toMatchObject({
      status: 'failed',
      progress: 45,
      // The upstream's own words may name our account with it: the customer reads ours.
      error: { code: 'content_policy_violation', message: 'The provider refused the video under its content policy.' },
    });
    expect(billing.releases).toEqual([created.id]);
    expect(billing.captures).toEqual([]);
  });

  it('keeps a job queued when the only upstream is out of quota, and starts it there once it takes jobs again', async () => {
    const { service } = await start();
    upstream.refuseNextCreate(429, 'insufficient_quota', 'Refused.');
    const created = await service.create(request);
    await runDue();
    expect(await retrieve(created.id)).toMatchObject({ status: 'queued', progress: 0 });
    clock.advance(1_000);
    await runDue();
    expect((await retrieve(created.id)).status).toBe('in_progress');
    expect(billing.releases).toEqual([]);
  });

  it.each([
    [400, 'moderation_blocked', 'content_policy_violation'],
    [400, 'invalid_value', 'generation_failed'],
  ])('fails the job when the upstream refuses the create with %i %s (as %s)', async (status, code, expected) => {
    const { service } = await start();
    upstream.refuseNextCreate(status, code, 'Refused.');
    const created = await service.create(request);
    await runDue();
    expect(await retrieve(created.id)).toMatchObject({ status: 'failed', progress: 0, error: { code: expected } });
    expect(billing.releases).toEqual([created.id]);
  });

  it('fails a submission over to the next deployment of the catalog when the first is down, polls the job there, and records it and the key that asked with the charge', async () => {
    const down = await startFakeUpstream(API_KEY, mp4);
    try {
      down.refuseNextCreate(503, 'server_error', 'Overloaded.');
      const catalog = join(dataDir, 'models.yaml');
      await writeFile(
        catalog,
        [
          'models:',
          '  video-2:',
          '    deployments:',
          '      - { id: primary, provider: openai, model: sora-2, base_url: "' + down.url + '", cost: { per_second: 0.05 } }',
          '      - { id: backup, provider: openai, model: sora-2-backup, base_url: "' + upstream.url + '", weight: 0, cost: { per_second: 0.07 } }',
        ].join('\n'),
      );
      const { service } = await start({ MODELS_FILE: catalog, VIDEO_UPSTREAM_API_KEY: API_KEY, VIDEO_PROVIDER: 'simulator' });
      const created = await service.create({ ...request, key_id: 'key_studio' });
      await runDue();
      expect(upstreamJob()).toMatchObject({ model: 'sora-2-backup' });
      expect((await retrieve(created.id)).status).toBe('in_progress');
      // A restart finds the job on the deployment it recorded, not on the first of the catalog.
      await start({ MODELS_FILE: catalog, VIDEO_UPSTREAM_API_KEY: API_KEY, VIDEO_PROVIDER: 'simulator' });
      Object.assign(upstreamJob(), { status: 'completed', progress: 100 });
      clock.advance(5_000);
      await runDue();
      expect((await retrieve(created.id)).status).toBe('completed');
      expect(billing.captures).toEqual([created.id]);
      expect(billing.usages.get(created.id)).toEqual({
        product: 'video',
        model: 'video-2',
        deployment: 'backup',
        provider: 'openai',
        upstream_model: 'sora-2-backup',
        seconds: 4,
        provider_cost_micros: 280_000,
        // Named at the create, kept on the video's stream across the restart.
        key_id: 'key_studio',
      });
    } finally {
      await down.close();
    }
  });

  it("tells clients to read a running video no sooner than 5 s nor than its deployment's next poll, and nothing once it ended", async () => {
    const catalog = join(dataDir, 'models.yaml');
    await writeFile(
      catalog,
      [
        'models:',
        '  video-2:',
        '    deployments:',
        '      - { id: slow, provider: openai, model: sora-2, base_url: "' + upstream.url + '", poll_interval_ms: 15000 }',
        '      - { id: quick, provider: openai, model: sora-2, base_url: "' + upstream.url + '", weight: 0, poll_interval_ms: 7000 }',
      ].join('\n'),
    );
    const { service } = await start({ MODELS_FILE: catalog, VIDEO_UPSTREAM_API_KEY: API_KEY, VIDEO_PROVIDER: 'simulator', SIM_VIDEO_POLL_MS: '1000' });
    const read = (id: string) => service.read({ org_id: 'org_1', video_id: id });
    const created = await service.create(request);
    expect(created.created_at).toBe(created.created);
    // Not submitted yet: the soonest any deployment of the model would poll it.
    expect((await read(created.id)).poll_after_ms).toBe(7_000);
    await runDue();
    expect(await read(created.id)).toMatchObject({ video: { status: 'in_progress', created_at: created.created }, poll_after_ms: 15_000 });
    Object.assign(upstreamJob(), { status: 'completed', progress: 100 });
    clock.advance(15_000);
    await runDue();
    expect(await read(created.id)).toMatchObject({ video: { status: 'completed' }, poll_after_ms: null });
    // The simulator, polled every second, runs test keys' videos: the spec's 5 s stands.
    const simulated = await service.create({ ...request, mode: 'test' });
    await runDue();
    expect(await read(simulated.id)).toMatchObject({ video: { status: 'in_progress' }, poll_after_ms: 5_000 });
    expect(service.withPollAfter(simulated, 'test').poll_after_ms).toBe(5_000);
  });

  it('starts a video from its input_reference on a deployment that takes images, keeping the bytes out of the stream and dropping them once submitted', async () => {
    const catalog = join(dataDir, 'models.yaml');
    await writeFile(
      catalog,
      [
        'models:',
        '  video-2:',
        '    deployments:',
        '      - { id: text-only, provider: openai, model: sora-2, base_url: "' + upstream.url + '" }',
        '      - { id: with-images, provider: openai, model: sora-2-i2v, base_url: "' + upstream.url + '", weight: 0, image_input: true }',
      ].join('\n'),
    );
    const { service } = await start({ MODELS_FILE: catalog, VIDEO_UPSTREAM_API_KEY: API_KEY, VIDEO_PROVIDER: 'simulator' });
    const png = Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), Buffer.alloc(64, 7)]);
    const created = await service.create({ ...request, input_reference: { content_type: 'image/png', data: png.toString('base64') } });
    const referenceFile = join(dataDir, 'upstream', 'org_1', `${created.id}.ref`);
    expect(await readFile(referenceFile)).toEqual(png);
    await runDue();
    // Only the deployment that takes images was asked, and it got the very bytes as OpenAI's file part.
    expect(upstreamJob()).toMatchObject({ model: 'sora-2-i2v', inputReference: { type: 'image/png', bytes: png } });
    await expect(stat(referenceFile)).rejects.toMatchObject({ code: 'ENOENT' });
    const stored = JSON.stringify(await stores.store.readStream(`video-${created.id}`));
    expect(stored).not.toContain(png.toString('base64'));
    expect(stored).toContain(createHash('sha256').update(png).digest('hex'));
    // A type no deployment takes is refused before anything is held.
    const webp = Buffer.from('524946460000000057454250', 'hex');
    const refused = await service.create({ ...request, input_reference: { content_type: 'image/webp', data: webp.toString('base64') } }).catch((error: unknown) => error);
    expect(refused).toMatchObject({ status: 400, code: 'unsupported_parameter', param: 'input_reference' });
    expect(billing.reserved.size).toBe(1);
  });

  it('refuses a length no deployment of the model makes with 400 unsupported_parameter, before anything is held', async () => {
    const catalog = join(dataDir, 'models.yaml');
    await writeFile(catalog, `models:\n  video-2:\n    deployments:\n      - { id: short, provider: openai, model: sora-2, base_url: "${upstream.url}", seconds: ["4", "8"] }\n`);
    const { service } = await start({ MODELS_FILE: catalog, VIDEO_UPSTREAM_API_KEY: API_KEY, VIDEO_PROVIDER: 'simulator' });
    const failure = await service.create({ ...request, seconds: '12' }).catch((error: unknown) => error);
    expect(failure).toMatchObject({ status: 400, code: 'unsupported_parameter', param: 'seconds' });
    expect(billing.reserved.size).toBe(0);
    // A test key's video is the simulator's, which makes every length.
    expect((await service.create({ ...request, mode: 'test', seconds: '12' })).status).toBe('queued');
  });

  it("serves a model of the operator's own from the catalog: its price, its deployment, its usage, its id, remixed alike", async () => {
    const catalog = join(dataDir, 'models.yaml');
    await writeFile(
      catalog,
      [
        'models:',
        '  clip-fast:',
        '    type: video',
        '    price: { per_second: 0.05 }',
        '    deployments:',
        `      - { id: clip-a, provider: openai, model: seedance-fast, base_url: "${upstream.url}", seconds: ["4", "8"], cost: { per_second: 0.02 } }`,
      ].join('\n'),
    );
    const { service } = await start({ MODELS_FILE: catalog, VIDEO_UPSTREAM_API_KEY: API_KEY, VIDEO_PROVIDER: 'simulator' });
    const own = { ...request, model: 'clip-fast', size: '1792x1024' as const };
    // Its own price per second, whatever the size: 4 s × 0.05 USD.
    const created = await service.create(own);
    expect(created).toMatchObject({ model: 'clip-fast', status: 'queued', 'x-cost': { amount: 0.2, currency: 'usd' } });
    expect(billing.reserved.get(created.id)).toBe(200_000);
    await runDue();
    expect(upstreamJob()).toMatchObject({ model: 'seedance-fast', seconds: '4', size: '1792x1024' });
    Object.assign(upstreamJob(), { status: 'completed', progress: 100 });
    clock.advance(5_000);
    await runDue();
    expect(await retrieve(created.id)).toMatchObject({ id: created.id, model: 'clip-fast', status: 'completed', 'x-cost': { amount: 0.2, currency: 'usd' } });
    expect(billing.captures).toEqual([created.id]);
    expect(billing.usages.get(created.id)).toEqual({
      product: 'video',
      model: 'clip-fast',
      deployment: 'clip-a',
      provider: 'openai',
      upstream_model: 'seedance-fast',
      seconds: 4,
      provider_cost_micros: 80_000,
    });
    expect((await service.list({ org_id: 'org_1', limit: 20, order: 'desc' })).data.map((v) => [v.id, v.model])).toEqual([[created.id, 'clip-fast']]);
    expect(service.deployments()).toContainEqual(expect.objectContaining({ model: 'clip-fast', id: 'clip-a', upstream_model: 'seedance-fast', calls: 1 }));

    // A remix keeps the source's model, and its price.
    const remix = await service.remix({ org_id: 'org_1', mode: 'live', video_id: created.id, prompt: 'The same lighthouse at dawn' });
    expect(remix).toMatchObject({ model: 'clip-fast', remixed_from_video_id: created.id, 'x-cost': { amount: 0.2, currency: 'usd' } });
    await runDue();
    expect(upstreamJob()).toMatchObject({ model: 'seedance-fast', prompt: 'The same lighthouse at dawn' });

    // What none of its deployments makes is refused before anything is held; a test key's video is the simulator's.
    const reserved = billing.reserved.size;
    await expect(service.create({ ...own, seconds: '12' })).rejects.toMatchObject({ status: 400, code: 'unsupported_parameter', param: 'seconds' });
    expect(billing.reserved.size).toBe(reserved);
    expect(await service.create({ ...own, mode: 'test', seconds: '12' })).toMatchObject({ model: 'clip-fast', status: 'queued', 'x-cost': { amount: 0.6, currency: 'usd' } });
    // The spec's models keep the spec's prices beside it.
    expect((await service.create({ ...request, model: 'video-2-pro', mode: 'test' }))['x-cost']).toEqual({ amount: 1.2, currency: 'usd' });
  });

  it('refuses a model it does not serve with 400 invalid_model, naming the models it serves, before anything is held', async () => {
    const { service } = await start();
    for (const model of ['nope', 'video-3']) {
      await expect(service.create({ ...request, model })).rejects.toMatchObject({
        status: 400,
        type: 'invalid_request_error',
        code: 'invalid_model',
        param: 'model',
        // What the gateway answered when it knew the spec's models only.
        message: "Invalid 'model': model must be one of video-2, video-2-pro.",
      });
      await expect(service.create({ ...request, mode: 'test', model })).rejects.toMatchObject({ status: 400, code: 'invalid_model' });
    }
    expect(billing.reserved.size).toBe(0);
    expect((await service.list({ org_id: 'org_1', limit: 20, order: 'desc' })).data).toEqual([]);

    const catalog = join(dataDir, 'models.yaml');
    await writeFile(catalog, `models:\n  clip-fast:\n    type: video\n    price: { per_second: 0.05 }\n    deployments:\n      - { id: clip-a, provider: simulator, model: sim }\n`);
    const withOwn = await start({ MODELS_FILE: catalog, VIDEO_PROVIDER: 'simulator' });
    await expect(withOwn.service.create({ ...request, model: 'clip-slow' })).rejects.toMatchObject({
      code: 'invalid_model',
      message: "Invalid 'model': model must be one of video-2, video-2-pro, clip-fast.",
    });
  });

  it('retries a capture billing could not take, across a restart, and captures exactly once', async () => {
    const first = await start();
    const created = await first.service.create(request);
    await runDue();
    Object.assign(upstreamJob(), { status: 'completed', progress: 100 });
    billing.unavailableCaptures = 2;
    clock.advance(5_000);
    await runDue();
    expect((await retrieve(created.id)).status).toBe('completed');
    expect(billing.captures).toEqual([]);

    await start();
    await runDue();
    expect(billing.captures).toEqual([]);
    clock.advance(1_000);
    await runDue();
    expect(billing.captures).toEqual([created.id]);
    clock.advance(1_000);
    await runDue();
    await start();
    await runDue();
    expect(billing.captures).toEqual([created.id]);
    expect(billing.releases).toEqual([]);
  });

  it('records a completed video whose hold billing let expire as not charged, and asks for its capture no more', async () => {
    const { service } = await start();
    const created = await service.create(request);
    await runDue();
    Object.assign(upstreamJob(), { status: 'completed', progress: 100 });
    billing.lapsedCaptures = 1;
    clock.advance(5_000);
    await runDue();
    const video = await retrieve(created.id);
    expect(video).toMatchObject({ status: 'completed', 'x-billing': 'released' });
    for (let step = 0; step < 3; step++) {
      clock.advance(5_000);
      await runDue();
    }
    expect(billing.refusedCaptures).toEqual([created.id]);
    expect(billing.captures).toEqual([]);
  });

  it('fails with timeout, refunded once, a job whose service came back after the time limit', async () => {
    const first = await start({ VIDEO_JOB_TIMEOUT_MS: '60000' });
    const created = await first.service.create(request);
    await runDue();
    await first.close();
    running = undefined;
    clock.advance(60_000);
    await start({ VIDEO_JOB_TIMEOUT_MS: '60000' });
    await runDue();
    expect(await retrieve(created.id)).toMatchObject({ status: 'failed', error: { code: 'timeout' } });
    expect(billing.releases).toEqual([created.id]);
    await start({ VIDEO_JOB_TIMEOUT_MS: '60000' });
    await runDue();
    expect(billing.releases).toEqual([created.id]);
  });

  it('releases the reservation of a create that died between reserving and queueing, and never shows that video', async () => {
    const first = await start();
    billing.hangingReserves = 1;
    void first.service.create(request);
    await vi.waitFor(() => expect(billing.reserved.size).toBe(1));
    const [id] = [...billing.reserved.keys()];
    await first.close();
    running = undefined;

    await start();
    await runDue();
    expect(billing.releases).toEqual([]);
    clock.advance(60_000);
    await runDue();
    expect(billing.releases).toEqual([id]);
    await expect(retrieve(id!)).rejects.toMatchObject({ detail: { kind: 'NotFound', resource: 'video' } });
    expect((await running!.video.service.list({ org_id: 'org_1', limit: 20, order: 'desc' })).data).toEqual([]);
  });

  it('prices from VIDEO_PRICES when it is configured', async () => {
    const prices = {
      'video-2': { '1280x720': 0.05, '720x1280': 0.05, '1024x1792': 0.07, '1792x1024': 0.07 },
      'video-2-pro': { '1280x720': 0.2, '720x1280': 0.2, '1024x1792': 0.4, '1792x1024': 0.4 },
    };
    const { service } = await start({ VIDEO_PRICES: JSON.stringify(prices) });
    const created = await service.create({ ...request, seconds: '8' });
    expect(created['x-cost']).toEqual({ amount: 0.4, currency: 'usd' });
    expect(billing.reserved.get(created.id)).toBe(400_000);
  });

  it('answers a repeated Idempotency-Key with the first response for 24 hours, then creates anew', async () => {
    const { service } = await start();
    const keyed = { ...request, idempotency_key: 'retry-me' };
    const first = await service.create(keyed);
    await runDue();
    expect(await service.create(keyed)).toEqual(first);
    clock.advance(24 * 60 * 60 * 1000 - 1);
    expect((await service.create(keyed)).id).toBe(first.id);
    clock.advance(1);
    const later = await service.create(keyed);
    expect(later.id).not.toBe(first.id);
    expect([...billing.reserved.keys()].filter((id) => id === first.id || id === later.id)).toHaveLength(2);
  });

  async function completedVideo(env: Record<string, string>) {
    const { service } = await start(env);
    const created = await service.create(request);
    await runDue();
    Object.assign(upstreamJob(), { status: 'completed', progress: 100 });
    clock.advance(5_000);
    await runDue();
    return created.id;
  }
  const lifecycle = { VIDEO_PERSIST_AFTER_MS: '2700000', VIDEO_TEMP_TTL_MS: '3600000' };

  it('persists to object storage (S3 when configured) after the configured age and keeps serving the same bytes from there', async () => {
    const s3 = await startFakeS3();
    const id = await completedVideo({ ...lifecycle, VIDEO_S3_BUCKET: 'videos', VIDEO_S3_ENDPOINT: s3.url, VIDEO_S3_ACCESS_KEY_ID: 'k', VIDEO_S3_SECRET_ACCESS_KEY: 's' });
    expect(await retrieve(id)).toMatchObject({ 'x-persisted': false, 'x-storage-provider': 'upstream', expires_at: expect.any(Number) });
    clock.advance(2_700_000);
    await runDue();
    expect(await retrieve(id)).toMatchObject({ 'x-persisted': true, 'x-storage-provider': 'object_store', expires_at: null });
    clock.advance(3_600_000);
    const content = await running!.video.service.readContent({ org_id: 'org_1', video_id: id, variant: 'video', copy: 'current', offset: 0, length: 8 });
    expect(Buffer.from(content.data, 'base64')).toEqual(mp4.subarray(0, 8));
    expect(s3.objects.get(`/videos/org_1/${id}.mp4`)).toEqual(mp4);
    await s3.close();
  });

  it("names the CDN's copy in url once persisted, when VIDEO_PUBLIC_BASE_URL is set, and the temporary URL before", async () => {
    const id = await completedVideo({ ...lifecycle, VIDEO_PUBLIC_BASE_URL: 'https://cdn.example.com/videos/' });
    expect((await retrieve(id)).url).toBe(`https://api.example.com/v1/videos/${id}/content/temporary`);
    clock.advance(2_700_000);
    await runDue();
    expect(await retrieve(id)).toMatchObject({ 'x-persisted': true, url: `https://cdn.example.com/videos/org_1/${id}.mp4` });
  });

  const read = (id: string, copy: 'current' | 'temporary' | 'permanent') =>
    running!.video.service.readContent({ org_id: 'org_1', video_id: id, variant: 'video', copy, offset: 0, length: 8 });

  it('without a CDN: the temporary URL serves for its hour, whatever happens meanwhile, then 410; url names the permanent path once persisted', async () => {
    const id = await completedVideo(lifecycle);
    const temporary = `https://api.example.com/v1/videos/${id}/content/temporary`;
    expect((await retrieve(id)).url).toBe(temporary);
    // The video.completed event (what webhooks deliver) carries the temporary URL.
    const completed = (await stores.store.readStream(`video-${id}`)).find((e) => e.type === 'VideoCompleted')!;
    expect((completed.data as { video: { url: string } }).video.url).toBe(temporary);
    expect(Buffer.from((await read(id, 'temporary')).data, 'base64')).toEqual(mp4.subarray(0, 8));
    await expect(read(id, 'permanent')).rejects.toMatchObject({ status: 400, code: 'video_not_persisted' });

    clock.advance(2_700_000);
    await runDue();
    expect(await retrieve(id)).toMatchObject({ 'x-persisted': true, url: `https://api.example.com/v1/videos/${id}/content/permanent` });
    // Persisted 45 minutes in: the temporary URL still has a quarter of an hour, served from the permanent copy.
    for (const copy of ['temporary', 'permanent', 'current'] as const) expect(Buffer.from((await read(id, copy)).data, 'base64')).toEqual(mp4.subarray(0, 8));

    clock.advance(900_000 - 1);
    await expect(read(id, 'temporary')).resolves.toBeDefined();
    clock.advance(1);
    await expect(read(id, 'temporary')).rejects.toMatchObject({ status: 410, code: 'temporary_url_expired', message: expect.stringContaining(`GET /v1/videos/${id}`) });
    await expect(
      running!.video.service.describeContent({ org_id: 'org_1', video_id: id, variant: 'thumbnail', copy: 'temporary' }),
    ).rejects.toMatchObject({ status: 410 });
    expect(Buffer.from((await read(id, 'permanent')).data, 'base64')).toEqual(mp4.subarray(0, 8));
    expect(Buffer.from((await read(id, 'current')).data, 'base64')).toEqual(mp4.subarray(0, 8));
    expect((await retrieve(id)).status).toBe('completed');
  });

  it('with S3 and VIDEO_S3_SIGNED_URL_TTL_SECONDS: url is a presigned GET of the object, signed again on each read', async () => {
    const s3 = await startFakeS3();
    const storage = { VIDEO_S3_BUCKET: 'videos', VIDEO_S3_ENDPOINT: s3.url, VIDEO_S3_ACCESS_KEY_ID: 'AKIDTEST', VIDEO_S3_SECRET_ACCESS_KEY: 'test-secret' };
    const id = await completedVideo({ ...lifecycle, ...storage, VIDEO_S3_SIGNED_URL_TTL_SECONDS: '900' });
    expect((await retrieve(id)).url).toBe(`https://api.example.com/v1/videos/${id}/content/temporary`);
    clock.advance(2_700_000);
    await runDue();

    const first = new URL((await retrieve(id)).url!);
    expect(`${first.origin}${first.pathname}`).toBe(`${s3.url}/videos/org_1/${id}.mp4`);
    expect(first.searchParams.get('X-Amz-Expires')).toBe('900');
    expect(first.searchParams.get('X-Amz-Date')).toBe(new Date(clock.now()).toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, ''));
    expect(first.searchParams.get('X-Amz-Signature')).toBe(expectedPresignedSignature(first.href, 'test-secret', 'us-east-1'));
    expect(Buffer.from(await (await fetch(first)).arrayBuffer())).toEqual(mp4);

    clock.advance(600_000);
    const listed = (await running!.video.service.list({ org_id: 'org_1', limit: 20, order: 'desc' })).data.find((v) => v.id === id)!;
    const again = new URL(listed.url!);
    expect(again.searchParams.get('X-Amz-Date')).not.toBe(first.searchParams.get('X-Amz-Date'));
    expect(again.searchParams.get('X-Amz-Signature')).toBe(expectedPresignedSignature(again.href, 'test-secret', 'us-east-1'));
    await s3.close();
  });

  it('with S3 but no signed-URL lifetime, url names the permanent content path', async () => {
    const s3 = await startFakeS3();
    const id = await completedVideo({ ...lifecycle, VIDEO_S3_BUCKET: 'videos', VIDEO_S3_ENDPOINT: s3.url, VIDEO_S3_ACCESS_KEY_ID: 'k', VIDEO_S3_SECRET_ACCESS_KEY: 's' });
    clock.advance(2_700_000);
    await runDue();
    expect((await retrieve(id)).url).toBe(`https://api.example.com/v1/videos/${id}/content/permanent`);
    await s3.close();
  });

  it('answers 410 video_expired for a video whose service was down until past the temporary TTL', async () => {
    const id = await completedVideo(lifecycle);
    await running!.video.close();
    running = undefined;
    clock.advance(3_600_000);
    await start(lifecycle);
    await runDue();
    await expect(retrieve(id)).rejects.toMatchObject({ status: 410, code: 'video_expired' });
    await expect(
      running!.video.service.readContent({ org_id: 'org_1', video_id: id, variant: 'video', copy: 'current', offset: 0, length: 8 }),
    ).rejects.toMatchObject({ status: 410 });
    // Its temporary URL is gone too, as the video itself is: the spec's code, since it was never persisted.
    await expect(read(id, 'temporary')).rejects.toMatchObject({ status: 410, code: 'video_expired' });
  });
});

describe('video jobs on the simulator', () => {
  let stores: ReturnType<typeof openSqliteStores>;
  let billing: FakeBilling;
  let clock: ManualClock;
  let dataDir: string;
  let running: { video: Awaited<ReturnType<typeof createVideo>>; scheduler: ClockScheduler } | undefined;

  beforeEach(async () => {
    stores = openSqliteStores({ filename: ':memory:' });
    billing = new FakeBilling();
    clock = new ManualClock(T0);
    dataDir = await mkdtemp(join(tmpdir(), 'oc-video-sim-'));
  });
  afterEach(async () => {
    await running?.video.close();
    running = undefined;
    await stores.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  /** A video service "process" on the shared store and data dir; the clock moves only when the test says so. */
  async function start(env: Record<string, string> = {}) {
    await running?.video.close();
    const scheduler = new ClockScheduler(clock, () => undefined, 3_600_000);
    const video = await createVideo({
      eventStore: stores.store,
      readModels: new SqliteReadModelStore({ filename: ':memory:' }),
      client: billing as unknown as ServiceClient,
      clock,
      ids: sortableIds,
      logger,
      config: VideoConfigSchema.parse({ SIM_VIDEO_DURATION_MS: '0', SIM_VIDEO_PRERENDER: '0', ...env }),
      publicBaseUrl: 'https://api.example.com',
      dataDir,
      scheduler,
    });
    running = { video, scheduler };
    await video.listening();
    return video;
  }
  const runDue = async () => {
    for (let i = 0; i < 4; i++) await running!.scheduler.runDue();
  };
  const retrieve = (id: string) => running!.video.service.get({ org_id: 'org_1', video_id: id });
  const events = async (id: string) => (await stores.store.readStream(`video-${id}`)).map((e) => e.type);
  const temporaryFile = (id: string, ext: 'mp4' | 'webp') => join(dataDir, 'upstream', 'org_1', `${id}.${ext}`);
  const rendered = async (ext: 'mp4' | 'webp') => {
    const names = (await readdir(join(dataDir, 'renders'))).filter((n) => n.endsWith(`.${ext}`));
    return names.map((n) => join(dataDir, 'renders', n));
  };

  it("makes a video that starts from an input_reference of the image itself, the same clip for the same image, and a test key's too", async () => {
    const { service } = await start();
    const image = solidPng(64, 36, [200, 40, 40]);
    const input_reference = { content_type: 'image/png' as const, data: image.toString('base64') };
    const first = await service.create({ ...request, input_reference });
    const second = await service.create({ ...request, mode: 'test', input_reference });
    const plain = await service.create(request);
    await runDue();
    for (const video of [first, second, plain]) expect((await retrieve(video.id)).status).toBe('completed');
    const [a, b, c] = await Promise.all([first, second, plain].map((v) => readFile(temporaryFile(v.id, 'mp4'))));
    expect(a!.subarray(4, 8).toString('latin1')).toBe('ftyp');
    expect(a).toEqual(b);
    expect(a).not.toEqual(c);
    const [still, plainStill] = await Promise.all([readFile(temporaryFile(first.id, 'webp')), readFile(temporaryFile(plain.id, 'webp'))]);
    expect(still.toString('latin1', 8, 12)).toBe('WEBP');
    expect(still).not.toEqual(plainStill);
    // Submitted, the image itself is gone from the file store.
    await expect(stat(join(dataDir, 'upstream', 'org_1', `${first.id}.ref`))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it("says in x-billing what a video costs its organization: a live one's price held, then charged; a test key's and a failed one's never", async () => {
    const { service } = await start({ VIDEO_RETRY_MS: '1000' });
    const live = await service.create(request);
    const test = await service.create({ ...request, mode: 'test' });
    const failed = await service.create({ ...request, prompt: 'A lighthouse in a storm [sim:fail=generation_failed]' });
    expect([live, test, failed].map((v) => v['x-billing'])).toEqual(['reserved', 'test', 'reserved']);
    // Completed, but billing cannot take the capture yet: the price is still only held.
    billing.unavailableCaptures = 1;
    await runDue();
    expect(billing.captures).toEqual([]);
    expect(await retrieve(live.id)).toMatchObject({ status: 'completed', 'x-billing': 'reserved' });
    expect(await retrieve(failed.id)).toMatchObject({ status: 'failed', 'x-billing': 'released' });
    clock.advance(1_000);
    await runDue();
    expect(billing.captures).toEqual([live.id]);
    expect(billing.releases).toEqual([failed.id]);
    const read = async (id: string) => (await retrieve(id))['x-billing'];
    expect([await read(live.id), await read(test.id), await read(failed.id)]).toEqual(['charged', 'test', 'released']);
    // The list says the same, and so does a replica that projects the stream afresh.
    const listed = await service.list({ org_id: 'org_1', limit: 10, order: 'desc' });
    expect(Object.fromEntries(listed.data.map((v) => [v.id, v['x-billing']]))).toEqual({ [live.id]: 'charged', [test.id]: 'test', [failed.id]: 'released' });
    await start({ VIDEO_RETRY_MS: '1000' });
    expect([await read(live.id), await read(test.id), await read(failed.id)]).toEqual(['charged', 'test', 'released']);
    expect(live['x-cost']).toEqual(test['x-cost']);
  });

  it('completes a zero-duration job in the step that starts it, without the clock moving, with every event', async () => {
    const { service } = await start();
    const created = await service.create(request);
    await running!.scheduler.runDue();
    expect(await retrieve(created.id)).toMatchObject({ status: 'completed', progress: 100, url: `https://api.example.com/v1/videos/${created.id}/content/temporary` });
    await runDue();
    expect(await events(created.id)).toEqual([
      'VideoRequested',
      'VideoQueued',
      'GenerationStarted',
      'VideoProcessing',
      'VideoStored',
      'VideoCompleted',
      'VideoCharged',
    ]);
    const processing = (await stores.store.readStream(`video-${created.id}`)).find((e) => e.type === 'VideoProcessing')!;
    expect(processing.data).toMatchObject({ video: { status: 'in_progress', progress: 1 } });
    expect(billing.captures).toEqual([created.id]);
  });

  it('completes a job exactly when its duration is up, not at the next poll after it', async () => {
    const { service } = await start({ SIM_VIDEO_DURATION_MS: '1500', SIM_VIDEO_POLL_MS: '1000' });
    const created = await service.create(request);
    await runDue();
    clock.advance(1_000);
    await runDue();
    expect(await retrieve(created.id)).toMatchObject({ status: 'in_progress', progress: 66 });
    clock.advance(499);
    await runDue();
    expect((await retrieve(created.id)).status).toBe('in_progress');
    clock.advance(1);
    await runDue();
    expect(await retrieve(created.id)).toMatchObject({ status: 'completed', progress: 100 });
  });

  it('renders the clip and the still of one size and length once: every job links the same files', async () => {
    const { service } = await start();
    const first = await service.create(request);
    const second = await service.create({ ...request, prompt: 'A different prompt, same size' });
    await runDue();
    expect((await retrieve(first.id)).status).toBe('completed');
    expect((await retrieve(second.id)).status).toBe('completed');
    const [mp4] = await rendered('mp4');
    const [webp] = await rendered('webp');
    expect([(await rendered('mp4')).length, (await rendered('webp')).length]).toEqual([1, 1]);
    for (const id of [first.id, second.id]) {
      expect((await stat(temporaryFile(id, 'mp4'))).ino).toBe((await stat(mp4!)).ino);
      expect((await stat(temporaryFile(id, 'webp'))).ino).toBe((await stat(webp!)).ino);
    }
    const still = await service.readContent({ org_id: 'org_1', video_id: second.id, variant: 'thumbnail', copy: 'current', offset: 0, length: 12 });
    expect(Buffer.from(still.data, 'base64').subarray(8, 12).toString('latin1')).toBe('WEBP');

    await service.delete({ org_id: 'org_1', video_id: first.id });
    expect(await readFile(temporaryFile(second.id, 'mp4'))).toEqual(await readFile(mp4!));
  });

  it('renders a clip again when its files were removed from disk while the service ran', async () => {
    const { service } = await start({ VIDEO_RETRY_MS: '1000' });
    const first = await service.create(request);
    await runDue();
    expect((await retrieve(first.id)).status).toBe('completed');
    await rm(join(dataDir, 'renders'), { recursive: true, force: true });
    const second = await service.create(request);
    await runDue();
    expect((await retrieve(second.id)).status).toBe('in_progress');
    clock.advance(1_000);
    await runDue();
    expect((await retrieve(second.id)).status).toBe('completed');
    expect((await stat(temporaryFile(second.id, 'mp4'))).ino).toBe((await stat((await rendered('mp4'))[0]!)).ino);
  });

  it('does not render a clip again after a restart: the one on disk is served', async () => {
    const before = await start();
    const first = await before.service.create(request);
    await runDue();
    const [mp4] = await rendered('mp4');
    const cached = await stat(mp4!);

    const after = await start();
    const second = await after.service.create(request);
    await runDue();
    expect((await retrieve(second.id)).status).toBe('completed');
    expect(await rendered('mp4')).toEqual([mp4]);
    expect(await stat(mp4!)).toMatchObject({ ino: cached.ino, mtimeMs: cached.mtimeMs });
    expect((await stat(temporaryFile(second.id, 'mp4'))).ino).toBe(cached.ino);
    expect((await stat(temporaryFile(first.id, 'mp4'))).ino).toBe(cached.ino);
  });
});
