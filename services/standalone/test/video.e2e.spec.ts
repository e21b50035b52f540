import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { solidPng } from '../../video/test/png';
import { httpReceiver } from '../../webhook/test/support';
import { clientFor } from './client';
import { conformingFetch, conformingSdkFetch } from './conformance';
import { distributed, embedded, type RunningService, type Starter } from './harness';
import { natsReachable } from './nats';

const modes: [string, Starter][] = [
  ['embedded', embedded],
  ...((await natsReachable()) ? [['distributed over NATS', distributed] as [string, Starter]] : []),
];

const VIDEO_SCOPES = ['video:read', 'video:write', 'video:delete'];
const PROMPT = 'A paper boat drifting down a rainy street';
const body = (overrides: Record<string, unknown> = {}) => ({ model: 'video-2', prompt: PROMPT, seconds: '4', size: '1280x720', ...overrides });

/** Shared by both suites: a client, and a way to wait that moves the test's clock in embedded mode. */
function videoHarness(get: () => RunningService) {
  const api = () => clientFor(get());
  /**
   * Polls until `probe` stops throwing. Embedded, every poll moves the shared ManualClock by `stepMs`
   * (the simulator, persistence and expiry all read it); distributed, real time passes.
   */
  const eventually = <T>(probe: () => Promise<T>, stepMs = 100) =>
    vi.waitFor(
      async () => {
        get().clock?.advance(stepMs);
        return probe();
      },
      { timeout: 25_000, interval: 100 },
    );
  const retrieve = (key: string, id: string) => api().call('GET', `/v1/videos/${id}`, { token: key });
  const create = (key: string, overrides: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
    conformingFetch(get().url, `${get().url}/v1/videos`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body(overrides)),
    }).then(async (res) => ({ status: res.status, headers: res.headers, body: (await res.json()) as any }));
  const reachStatus = (key: string, id: string, status: string) =>
    eventually(async () => {
      const res = await retrieve(key, id);
      expect(res.body.status).toBe(status);
      return res.body;
    });
  const balance = async (key: string) => (await api().call('GET', '/v1/account/balance', { token: key })).body;
  const ledgerFor = async (orgId: string, videoId: string) =>
    ((await api().admin('GET', `/organizations/${orgId}/ledger?limit=100`)).body.data as any[]).filter((e) => e.reference === videoId);
  /** Polling tests make many requests: an enterprise organization and a generous key keep 429s out of them. */
  const customer = (credit = 10, scopes = VIDEO_SCOPES, key: Record<string, unknown> = {}) =>
    api().newCustomer({ credit, tier: 'enterprise', scopes: [...scopes], key: { rate_limit_per_minute: 100_000, ...key } });
  return { api, eventually, retrieve, create, reachStatus, balance, ledgerFor, customer };
}

describe.each(modes)('videos (%s)', (_mode, start) => {
  let service: RunningService;
  const h = videoHarness(() => service);

  beforeAll(async () => {
    service = await start({
      SIM_VIDEO_DURATION_MS: '1500',
      SIM_VIDEO_POLL_MS: '100',
      VIDEO_PERSIST_AFTER_MS: '2500',
      VIDEO_TEMP_TTL_MS: '600000',
      VIDEO_JOB_TIMEOUT_MS: '600000',
      VIDEO_RETRY_MS: '200',
      WEBHOOK_MODE: 'development',
      WEBHOOK_ALLOW_PRIVATE: '1',
    });
  });
  afterAll(async () => {
    await service?.stop();
  });

  const customer = (credit = 10, scopes = VIDEO_SCOPES, key: Record<string, unknown> = {}) => h.customer(credit, scopes, key);

  describe('POST /v1/videos', () => {
    it('answers 200 with the full video, queued at progress 0, reserves its cost, and GET sees it at once', async () => {
      const { key } = await customer(10);
      const res = await h.create(key);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        id: expect.stringMatching(/^video_[A-Za-z0-9]+$/),
        object: 'video',
        created: expect.any(Number),
        created_at: res.body.created,
        model: 'video-2',
        prompt: PROMPT,
        status: 'queued',
        progress: 0,
        seconds: '4',
        size: '1280x720',
        url: null,
        error: null,
        'x-cost': { amount: 0.4, currency: 'usd' },
        'x-billing': 'reserved',
        'x-storage-provider': 'upstream',
        'x-persisted': false,
        remixed_from_video_id: null,
        completed_at: null,
        expires_at: null,
      });
      expect(Number(res.headers.get('x-ratelimit-limit'))).toBeGreaterThan(0);
      // The simulator is polled every 100 ms here: the spec's 5 s is what a client is told.
      expect(res.headers.get('openai-poll-after-ms')).toBe('5000');
      const got = await h.retrieve(key, res.body.id);
      expect(got.status).toBe(200);
      expect(got.body.id).toBe(res.body.id);
      expect(await h.balance(key)).toMatchObject({ available: 9.6, reserved: 0.4 });
    });

    it.each([
      ['an unknown model', { model: 'video-3' }, 'invalid_model', 'model'],
      ['a missing model', { model: undefined }, 'missing_parameter', 'model'],
      ['a missing prompt', { prompt: undefined }, 'missing_parameter', 'prompt'],
      ['a prompt under 10 characters', { prompt: 'too short' }, 'invalid_prompt', 'prompt'],
      ['a prompt over 500 characters', { prompt: 'x'.repeat(501) }, 'invalid_prompt', 'prompt'],
      ['seconds 5', { seconds: '5' }, 'invalid_seconds', 'seconds'],
      ['seconds as a number', { seconds: 4 }, 'invalid_seconds', 'seconds'],
      ['a missing seconds', { seconds: undefined }, 'missing_parameter', 'seconds'],
      ['an unsupported size', { size: '640x480' }, 'invalid_size', 'size'],
      ['an unknown field', { style: 'noir' }, 'unknown_parameter', 'style'],
    ])('refuses %s with 400 naming the parameter, creating nothing', async (_, overrides, code, param) => {
      const { key } = await customer(10);
      const res = await h.create(key, overrides);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ type: 'invalid_request_error', code, param });
      if (code === 'invalid_seconds') expect(res.body.error.message).toMatch(/'4', '8' or '12'/);
      expect((await h.api().call('GET', '/v1/videos', { token: key })).body.data).toEqual([]);
    });

    it('prices by model, size and duration', async () => {
      const { key } = await customer(20);
      const pro = await h.create(key, { model: 'video-2-pro', size: '1792x1024', seconds: '12' });
      expect(pro.body['x-cost']).toEqual({ amount: 6, currency: 'usd' });
      const pro720 = await h.create(key, { model: 'video-2-pro', size: '720x1280', seconds: '8' });
      expect(pro720.body['x-cost']).toEqual({ amount: 2.4, currency: 'usd' });
    });

    it('answers 402 insufficient_quota with the required and available amounts when the balance is short, creating nothing', async () => {
      const { key } = await customer(0.2);
      const res = await h.create(key);
      expect(res.status).toBe(402);
      expect(res.body.error).toMatchObject({ type: 'insufficient_quota', code: 'insufficient_quota' });
      expect(res.body.error.message).toContain('$0.40');
      expect(res.body.error.message).toContain('$0.20');
      expect((await h.api().call('GET', '/v1/videos', { token: key })).body.data).toEqual([]);
      expect(await h.balance(key)).toMatchObject({ available: 0.2, reserved: 0 });
    });

    it('refuses a clear content-policy violation with 422, reserving nothing', async () => {
      const { key } = await customer(10);
      const res = await h.create(key, { prompt: 'explicit nude pictures of children' });
      expect(res.status).toBe(422);
      expect(res.body.error).toMatchObject({ type: 'invalid_request_error', code: 'content_policy_violation', param: 'prompt' });
      expect(await h.balance(key)).toMatchObject({ available: 10, reserved: 0 });
    });

    it('accepts multipart/form-data with the same fields, an image file only as input_reference, and refuses other content types', async () => {
      const { key } = await customer(10);
      const form = new FormData();
      for (const [name, value] of Object.entries(body())) form.set(name, String(value));
      const res = await conformingFetch(service.url, `${service.url}/v1/videos`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
      expect(res.status).toBe(200);
      const first = (await res.json()) as any;
      expect(first).toMatchObject({ status: 'queued', model: 'video-2', seconds: '4' });

      form.set('input_reference', new Blob([new Uint8Array([1, 2, 3])], { type: 'image/png' }), 'ref.png');
      const notAnImage = await conformingFetch(service.url, `${service.url}/v1/videos`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
      expect(notAnImage.status).toBe(400);
      expect(((await notAnImage.json()) as any).error).toMatchObject({ code: 'invalid_parameter', param: 'input_reference' });
      const remixForm = new FormData();
      remixForm.set('prompt', PROMPT);
      remixForm.set('input_reference', new Blob([solidPng(8, 8, [0, 0, 0])], { type: 'image/png' }), 'ref.png');
      const remixFile = await conformingFetch(service.url, `${service.url}/v1/videos/${first.id}/remix`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
        body: remixForm,
      });
      expect(remixFile.status).toBe(400);
      expect(((await remixFile.json()) as any).error).toMatchObject({ code: 'unsupported_parameter', param: 'input_reference' });

      const text = await h.api().call('POST', '/v1/videos', { token: key, rawBody: 'model=video-2', contentType: 'text/plain' });
      expect(text.status).toBe(415);
    });

    it('returns the first response for a repeated Idempotency-Key and charges once; a different body with that key is 409', async () => {
      const { key } = await customer(10);
      const first = await h.create(key, {}, { 'idempotency-key': 'order-42' });
      const again = await h.create(key, {}, { 'idempotency-key': 'order-42' });
      expect(again.status).toBe(200);
      expect(again.body).toEqual(first.body);
      expect(await h.balance(key)).toMatchObject({ reserved: 0.4 });
      const other = await h.create(key, { seconds: '8' }, { 'idempotency-key': 'order-42' });
      expect(other.status).toBe(409);
      expect(other.body.error).toMatchObject({ code: 'idempotency_key_reused' });
      expect((await h.api().call('GET', '/v1/videos', { token: key })).body.data).toHaveLength(1);
    });

    it('keeps an Idempotency-Key of the live and the test keys of one organization apart, each replayed in its own mode', async () => {
      const { key: live, orgId } = await customer(10);
      const testKey = await h.api().admin('POST', `/organizations/${orgId}/keys`, {
        name: 'test mode',
        scopes: [...VIDEO_SCOPES],
        mode: 'test',
        rate_limit_per_minute: 100_000,
      });
      const test = testKey.body.key as string;
      const create = (key: string, idempotencyKey: string) => h.create(key, {}, { 'idempotency-key': idempotencyKey });
      // Live first, then test; and test first, then live.
      for (const [first, second, idempotencyKey] of [
        [live, test, 'order-7'],
        [test, live, 'order-8'],
      ] as const) {
        const a = await create(first, idempotencyKey);
        const b = await create(second, idempotencyKey);
        expect([a.status, b.status]).toEqual([200, 200]);
        expect(b.body.id).not.toBe(a.body.id);
        expect((await create(first, idempotencyKey)).body).toEqual(a.body);
        expect((await create(second, idempotencyKey)).body).toEqual(b.body);
      }
      // Two live videos held once each; the test ones touch no balance.
      expect(await h.balance(live)).toMatchObject({ reserved: 0.8 });
      expect((await h.api().call('GET', '/v1/videos', { token: live })).body.data).toHaveLength(4);
    });

    it('is described in the OpenAPI document by the same contracts that validate it', async () => {
      const doc = (await (await fetch(`${service.url}/openapi.json`)).json()) as any;
      expect(doc.paths['/v1/videos'].post.requestBody.content['application/json'].schema.properties.seconds.enum).toEqual(['4', '8', '12']);
      expect(doc.paths['/v1/videos/{id}'].delete['x-required-scope']).toBe('video:delete');
      expect(doc.paths['/v1/videos/{id}/content'].get.parameters.map((p: any) => p.name)).toEqual(['id', 'variant', 'Range']);
    });

    it('answers 429 rate_limit_exceeded with Retry-After once the key’s per-minute limit is spent', async () => {
      const { key } = await h.api().newCustomer({ credit: 10, scopes: VIDEO_SCOPES, key: { rate_limit_per_minute: 1 } });
      expect((await h.create(key)).status).toBe(200);
      const limited = await h.create(key);
      expect(limited.status).toBe(429);
      expect(limited.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limit_exceeded' });
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(limited.headers.get('x-ratelimit-remaining')).toBe('0');
    });

    it('needs video:write to create and video:delete to delete', async () => {
      const { key } = await customer(10, ['video:read']);
      const res = await h.create(key);
      expect(res.status).toBe(403);
      expect(res.body.error).toMatchObject({ type: 'permission_error', code: 'insufficient_scope' });
      expect(res.body.error.message).toContain('video:write');
      const del = await h.api().call('DELETE', '/v1/videos/video_x', { token: key });
      expect(del.status).toBe(403);
      expect(del.body.error.message).toContain('video:delete');
    });
  });

  describe('the job', () => {
    it('goes queued → in_progress (progress never decreasing) → completed, captures the cost once, and serves a real MP4', async () => {
      const { key, orgId } = await customer(10);
      const created = await h.create(key);
      const id = created.body.id as string;
      const seen: number[] = [];
      await h.eventually(async () => {
        const res = await h.retrieve(key, id);
        if (res.body.status === 'in_progress') seen.push(res.body.progress);
        expect(res.body.status).toBe('completed');
      });
      expect(seen.length).toBeGreaterThan(0);
      expect(seen.every((p) => p >= 1 && p <= 99)).toBe(true);
      expect(seen).toEqual([...seen].sort((a, b) => a - b));

      const video = (await h.retrieve(key, id)).body;
      expect(video).toMatchObject({
        status: 'completed',
        progress: 100,
        url: `${service.url}/v1/videos/${id}/content/temporary`,
        error: null,
        'x-storage-provider': 'upstream',
        'x-persisted': false,
        completed_at: expect.any(Number),
        expires_at: expect.any(Number),
      });
      // The capture follows the recorded completion (the job's next step, or once billing answers).
      await h.eventually(async () => expect(await h.balance(key)).toMatchObject({ available: 9.6, reserved: 0 }));
      await h.eventually(async () => expect((await h.retrieve(key, id)).body['x-billing']).toBe('charged'));
      const ledger = await h.ledgerFor(orgId, id);
      expect(ledger.map((e) => e.type).sort()).toEqual(['capture', 'reservation']);
      expect(ledger.find((e) => e.type === 'capture').charged).toBe(0.4);

      const content = await conformingFetch(service.url, video.url, { headers: { authorization: `Bearer ${key}` } });
      expect(content.status).toBe(200);
      expect(content.headers.get('content-type')).toBe('video/mp4');
      expect(content.headers.get('accept-ranges')).toBe('bytes');
      const bytes = Buffer.from(await content.arrayBuffer());
      expect(Number(content.headers.get('content-length'))).toBe(bytes.length);
      expect(bytes.subarray(4, 8).toString('latin1')).toBe('ftyp');
      expect(bytes.includes(Buffer.from('avc1'))).toBe(true);

      const partial = await conformingFetch(service.url, video.url, { headers: { authorization: `Bearer ${key}`, range: 'bytes=0-99' } });
      expect(partial.status).toBe(206);
      expect(partial.headers.get('content-range')).toBe(`bytes 0-99/${bytes.length}`);
      expect(Buffer.from(await partial.arrayBuffer())).toEqual(bytes.subarray(0, 100));
      const tail = await conformingFetch(service.url, video.url, { headers: { authorization: `Bearer ${key}`, range: `bytes=${bytes.length - 10}-` } });
      expect(Buffer.from(await tail.arrayBuffer())).toEqual(bytes.subarray(bytes.length - 10));
      const outside = await conformingFetch(service.url, video.url, { headers: { authorization: `Bearer ${key}`, range: `bytes=${bytes.length}-` } });
      expect(outside.status).toBe(416);

      const thumbnail = await conformingFetch(service.url, `${video.url}?variant=thumbnail`, { headers: { authorization: `Bearer ${key}` } });
      expect(thumbnail.status).toBe(200);
      expect(thumbnail.headers.get('content-type')).toBe('image/webp');
      const webp = Buffer.from(await thumbnail.arrayBuffer());
      expect(webp.subarray(0, 4).toString('latin1')).toBe('RIFF');
      expect(webp.subarray(8, 12).toString('latin1')).toBe('WEBP');
      const sprites = await h.api().call('GET', `/v1/videos/${id}/content?variant=spritesheet`, { token: key });
      expect(sprites.status).toBe(400);
      expect(sprites.body.error).toMatchObject({ code: 'invalid_variant', param: 'variant' });

      const permanentPath = `${service.url}/v1/videos/${id}/content/permanent`;
      const early = await h.api().call('GET', `/v1/videos/${id}/content/permanent`, { token: key });
      expect(early.status).toBe(400);
      expect(early.body.error.code).toBe('video_not_persisted');

      // Persistence after VIDEO_PERSIST_AFTER_MS: url names the permanent copy; the same bytes from every URL.
      const persisted = await h.eventually(async () => {
        const res = await h.retrieve(key, id);
        expect(res.body['x-persisted']).toBe(true);
        return res.body;
      }, 500);
      expect(persisted).toMatchObject({ 'x-storage-provider': 'object_store', url: permanentPath, expires_at: null });
      // The temporary URL keeps serving until its hour after completion is over (VIDEO_TEMP_TTL_MS here).
      for (const url of [permanentPath, video.url, `${service.url}/v1/videos/${id}/content`]) {
        const again = await conformingFetch(service.url, url, { headers: { authorization: `Bearer ${key}` } });
        expect(Buffer.from(await again.arrayBuffer()), url).toEqual(bytes);
      }
      expect(await h.ledgerFor(orgId, id)).toHaveLength(2);
    });

    it('fails a job that hits a generation error, keeping its progress, and refunds the reservation', async () => {
      const { key, orgId } = await customer(10);
      const created = await h.create(key, { prompt: `${PROMPT} [sim:fail=generation_failed]` });
      const failed = await h.reachStatus(key, created.body.id, 'failed');
      expect(failed).toMatchObject({ url: null, error: { code: 'generation_failed', message: expect.any(String) }, 'x-billing': 'released' });
      expect(failed.progress).toBeGreaterThanOrEqual(1);
      expect(failed.progress).toBeLessThan(100);
      await h.eventually(async () => expect(await h.balance(key)).toMatchObject({ available: 10, reserved: 0 }));
      expect((await h.ledgerFor(orgId, created.body.id)).map((e) => e.type).sort()).toEqual(['release', 'reservation']);
      const content = await h.api().call('GET', `/v1/videos/${created.body.id}/content`, { token: key });
      expect(content.status).toBe(400);
      expect(content.body.error.code).toBe('video_not_ready');
    });

    it('runs test-key videos on the simulator without touching the balance', async () => {
      const { key, orgId } = await customer(1, VIDEO_SCOPES, { mode: 'test' });
      const created = await h.create(key, { model: 'video-2-pro', size: '1792x1024', seconds: '12' });
      expect(created.status).toBe(200);
      expect(created.body['x-billing']).toBe('test');
      expect(await h.reachStatus(key, created.body.id, 'completed')).toMatchObject({ 'x-billing': 'test' });
      expect(await h.balance(key)).toMatchObject({ available: 1, reserved: 0 });
      expect(await h.ledgerFor(orgId, created.body.id)).toEqual([]);
    });
  });

  describe('reading, listing, deleting and remixing', () => {
    it('answers 404 video_not_found for an unknown id and for another organization’s video', async () => {
      const owner = await customer(10);
      const stranger = await customer(10);
      const created = await h.create(owner.key);
      for (const [key, id] of [
        [owner.key, 'video_doesnotexist'],
        [stranger.key, created.body.id],
      ]) {
        const res = await h.retrieve(key!, id!);
        expect(res.status).toBe(404);
        expect(res.body.error).toMatchObject({ type: 'invalid_request_error', code: 'video_not_found' });
      }
      expect((await h.api().call('DELETE', `/v1/videos/${created.body.id}`, { token: stranger.key })).status).toBe(404);
    });

    it('lists only the organization’s videos with OpenAI’s cursor pagination', async () => {
      const { key } = await customer(10);
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        ids.push((await h.create(key)).body.id);
        service.clock?.advance(1000);
      }
      const first = await h.api().call('GET', '/v1/videos?limit=2', { token: key });
      expect(first.status).toBe(200);
      expect(first.body).toMatchObject({ object: 'list', first_id: ids[2], last_id: ids[1], has_more: true });
      expect(first.body.data.map((v: any) => v.id)).toEqual([ids[2], ids[1]]);
      const second = await h.api().call('GET', `/v1/videos?limit=2&after=${first.body.last_id}`, { token: key });
      expect(second.body).toMatchObject({ data: [expect.objectContaining({ id: ids[0] })], has_more: false });
      const asc = await h.api().call('GET', '/v1/videos?order=asc', { token: key });
      expect(asc.body.data.map((v: any) => v.id)).toEqual(ids);
      const other = await customer(10);
      expect((await h.api().call('GET', '/v1/videos', { token: other.key })).body).toMatchObject({ data: [], first_id: null, has_more: false });
      const bad = await h.api().call('GET', '/v1/videos?limit=101', { token: key });
      expect(bad.status).toBe(400);
      expect(bad.body.error.param).toBe('limit');
    });

    it('deletes a completed video in OpenAI’s shape; it is gone from GET, list and content', async () => {
      const { key } = await customer(10);
      const created = await h.create(key);
      await h.reachStatus(key, created.body.id, 'completed');
      const del = await h.api().call('DELETE', `/v1/videos/${created.body.id}`, { token: key });
      expect(del.status).toBe(200);
      expect(del.body).toEqual({ id: created.body.id, object: 'video.deleted', deleted: true });
      expect((await h.retrieve(key, created.body.id)).status).toBe(404);
      expect((await h.api().call('GET', `/v1/videos/${created.body.id}/content`, { token: key })).status).toBe(404);
      expect((await h.api().call('GET', '/v1/videos', { token: key })).body.data).toEqual([]);
      expect((await h.api().call('DELETE', `/v1/videos/${created.body.id}`, { token: key })).status).toBe(404);
    });

    it('cancels a job in progress on delete and releases its reservation; nothing is ever captured', async () => {
      const { key, orgId } = await customer(10);
      const created = await h.create(key);
      await h.reachStatus(key, created.body.id, 'in_progress');
      expect((await h.api().call('DELETE', `/v1/videos/${created.body.id}`, { token: key })).status).toBe(200);
      await h.eventually(async () => expect(await h.balance(key)).toMatchObject({ available: 10, reserved: 0 }));
      // Well past the simulated duration: still gone, still not charged.
      await h.eventually(async () => {
        expect((await h.retrieve(key, created.body.id)).status).toBe(404);
      }, 2000);
      expect((await h.ledgerFor(orgId, created.body.id)).map((e) => e.type).sort()).toEqual(['release', 'reservation']);
    });

    it('remixes a completed video into a new one with the same model, size and seconds, reserved like a create', async () => {
      const { key } = await customer(10);
      const source = await h.create(key, { model: 'video-2-pro', size: '720x1280', seconds: '4' });
      const early = await h.api().call('POST', `/v1/videos/${source.body.id}/remix`, { token: key, body: { prompt: 'The same boat, at night' } });
      expect(early.status).toBe(400);
      expect(early.body.error.code).toBe('video_not_completed');
      await h.reachStatus(key, source.body.id, 'completed');
      const remix = await h.api().call('POST', `/v1/videos/${source.body.id}/remix`, { token: key, body: { prompt: 'The same boat, at night' } });
      expect(remix.status).toBe(200);
      expect(remix.body).toMatchObject({
        id: expect.not.stringMatching(source.body.id),
        status: 'queued',
        prompt: 'The same boat, at night',
        model: 'video-2-pro',
        size: '720x1280',
        seconds: '4',
        remixed_from_video_id: source.body.id,
        'x-cost': { amount: 1.2, currency: 'usd' },
      });
      expect(await h.balance(key)).toMatchObject({ reserved: 1.2 });
      const missing = await h.api().call('POST', '/v1/videos/video_nope/remix', { token: key, body: { prompt: 'The same boat, at night' } });
      expect(missing.status).toBe(404);
      const short = await h.api().call('POST', `/v1/videos/${source.body.id}/remix`, { token: key, body: { prompt: 'short' } });
      expect(short.body.error).toMatchObject({ code: 'invalid_prompt', param: 'prompt' });
    });
  });

  describe('with the official openai SDK', () => {
    it('creates (from an image too), retrieves, lists, downloads, remixes and deletes', async () => {
      const { key } = await customer(10);
      const client = new OpenAI({ apiKey: key, baseURL: `${service.url}/v1`, maxRetries: 0 , fetch: conformingSdkFetch(service.url) });
      const video = await client.videos.create({ model: 'video-2' as never, prompt: PROMPT, seconds: '4', size: '1280x720' });
      expect(video).toMatchObject({ object: 'video', status: 'queued', progress: 0 });
      // The SDK's Video type has created_at where the spec has created.
      expect(video.created_at).toBe((video as unknown as { created: number }).created);
      expect(video._request_id).toMatch(/^req_[0-9a-f]{32}$/);
      // What a poll helper reads between two reads of a running video, and finds no more once it has ended.
      const running = await client.videos.retrieve(video.id).withResponse();
      expect(running.request_id).toMatch(/^req_[0-9a-f]{32}$/);
      expect(running.request_id).not.toBe(video._request_id);
      expect(running.data.status).not.toBe('completed');
      expect(running.response.headers.get('openai-poll-after-ms')).toBe('5000');
      await h.eventually(async () => expect((await client.videos.retrieve(video.id)).status).toBe('completed'));
      const completed = await client.videos.retrieve(video.id).withResponse();
      expect(completed.data.created_at).toBe(video.created_at);
      expect(completed.response.headers.get('openai-poll-after-ms')).toBeNull();
      const listed = [];
      for await (const v of client.videos.list({ limit: 10 })) {
        expect(v.created_at).toBe(video.created_at);
        listed.push(v.id);
      }
      expect(listed).toEqual([video.id]);
      const missing = await client.videos.retrieve('video_nope').catch((error: unknown) => error);
      expect((missing as { requestID?: string }).requestID).toMatch(/^req_[0-9a-f]{32}$/);
      const content = await client.videos.downloadContent(video.id);
      const bytes = Buffer.from(await content.arrayBuffer());
      expect(bytes.subarray(4, 8).toString('latin1')).toBe('ftyp');
      // image-to-video, as the SDK sends it: the image as a file part, or OpenAI's {image_url} with a data: URL.
      const png = solidPng(64, 36, [30, 90, 200]);
      const fromFile = await client.videos.create({ model: 'video-2' as never, prompt: PROMPT, seconds: '4', size: '1280x720', input_reference: await toFile(png, 'ref.png', { type: 'image/png' }) });
      const fromUrl = await client.videos.create({
        model: 'video-2' as never,
        prompt: PROMPT,
        seconds: '4',
        size: '1280x720',
        input_reference: { image_url: `data:image/png;base64,${png.toString('base64')}` },
      });
      await h.eventually(async () => {
        for (const made of [fromFile, fromUrl]) expect((await client.videos.retrieve(made.id)).status).toBe('completed');
      });
      const [fileClip, urlClip] = await Promise.all([fromFile, fromUrl].map(async (v) => Buffer.from(await (await client.videos.downloadContent(v.id)).arrayBuffer())));
      expect(fileClip!.subarray(4, 8).toString('latin1')).toBe('ftyp');
      expect(fileClip).toEqual(urlClip);
      expect(fileClip).not.toEqual(bytes);
      const remix = await client.videos.remix(video.id, { prompt: 'The boat sails into the sunset' });
      expect(remix).toMatchObject({ status: 'queued', remixed_from_video_id: video.id });
      expect(await client.videos.delete(remix.id)).toEqual({ id: remix.id, object: 'video.deleted', deleted: true });
      await expect(client.videos.retrieve(remix.id)).rejects.toMatchObject({ status: 404, code: 'video_not_found' });
    });
  });

  describe('notifications', () => {
    it('has the webhook service deliver video.processing, video.completed and video.failed, with the spec data, for real jobs', async () => {
      const { key } = await customer(10, [...VIDEO_SCOPES, 'webhook:write']);
      const receiver = await httpReceiver();
      try {
        const hook = await h.api().call('POST', '/v1/webhooks', {
          token: key,
          body: { url: receiver.url, events: ['video.processing', 'video.completed', 'video.failed'] },
        });
        expect(hook.status).toBe(200);
        const created = await h.create(key);
        const failing = await h.create(key, { prompt: `${PROMPT} [sim:fail=generation_failed]` });
        const video = await h.reachStatus(key, created.body.id, 'completed');
        const failed = await h.reachStatus(key, failing.body.id, 'failed');
        const events = await h.eventually(async () => {
          const received = receiver.received.map((r) => JSON.parse(r.rawBody));
          expect(received.map((e) => `${e.type} ${e.data.id}`).sort()).toEqual(
            [`video.processing ${video.id}`, `video.completed ${video.id}`, `video.processing ${failed.id}`, `video.failed ${failed.id}`].sort(),
          );
          return received;
        });
        const base = { id: video.id, object: 'video', created: video.created, model: 'video-2', prompt: PROMPT };
        const of = (type: string, id: string) => events.find((e) => e.type === type && e.data.id === id).data;
        expect(of('video.processing', video.id)).toEqual({ ...base, status: 'in_progress', progress: 1, url: null });
        expect(of('video.failed', failed.id)).toEqual({
          id: failed.id,
          object: 'video',
          created: failed.created,
          model: 'video-2',
          prompt: failed.prompt,
          status: 'failed',
          progress: failed.progress,
          url: null,
          error: failed.error,
        });
        expect(of('video.completed', video.id)).toEqual({
          ...base,
          status: 'completed',
          progress: 100,
          url: video.url,
          seconds: '4',
          size: '1280x720',
          cost: { amount: 0.4, currency: 'usd' },
        });
      } finally {
        await receiver.close();
      }
    });
  });

  describe('restart', () => {
    it('finishes a job that was in progress when the services stopped, with exactly one capture', async () => {
      const { key, orgId } = await customer(10);
      const created = await h.create(key);
      const failing = await h.create(key, { prompt: `${PROMPT} [sim:fail=content_policy_violation]` });
      await h.reachStatus(key, created.body.id, 'in_progress');
      await service.restart();
      await h.reachStatus(key, created.body.id, 'completed');
      const failed = await h.reachStatus(key, failing.body.id, 'failed');
      expect(failed.error.code).toBe('content_policy_violation');
      await h.eventually(async () => expect(await h.balance(key)).toMatchObject({ available: 9.6, reserved: 0 }));
      expect((await h.ledgerFor(orgId, created.body.id)).map((e) => e.type).sort()).toEqual(['capture', 'reservation']);
      expect((await h.ledgerFor(orgId, failing.body.id)).map((e) => e.type).sort()).toEqual(['release', 'reservation']);
    }, 150_000);
  });
});

describe.each(modes)('video time limits (%s)', (_mode, start) => {
  let service: RunningService;
  const h = videoHarness(() => service);

  beforeAll(async () => {
    service = await start({
      SIM_VIDEO_DURATION_MS: '1000',
      SIM_VIDEO_POLL_MS: '100',
      VIDEO_PERSIST_AFTER_MS: '600000',
      VIDEO_TEMP_TTL_MS: '2500',
      VIDEO_JOB_TIMEOUT_MS: '4000',
      VIDEO_RETRY_MS: '200',
    });
  });
  afterAll(async () => {
    await service?.stop();
  });

  it('answers 410 video_expired once a completed video outlives temporary storage without being persisted', async () => {
    const { key } = await h.customer(10);
    const created = await h.create(key);
    await h.reachStatus(key, created.body.id, 'completed');
    const expired = await h.eventually(async () => {
      const res = await h.retrieve(key, created.body.id);
      expect(res.status).toBe(410);
      return res.body;
    }, 500);
    expect(expired.error).toMatchObject({ type: 'invalid_request_error', code: 'video_expired' });
    expect((await h.api().call('GET', `/v1/videos/${created.body.id}/content`, { token: key })).status).toBe(410);
    const temporary = await h.api().call('GET', `/v1/videos/${created.body.id}/content/temporary`, { token: key });
    expect(temporary.status).toBe(410);
    expect(temporary.body.error.code).toBe('video_expired');
  });

  it('fails a job running past the time limit with timeout and refunds it', async () => {
    const { key, orgId } = await h.customer(10);
    const created = await h.create(key, { prompt: `${PROMPT} [sim:stall]` });
    const failed = await h.eventually(async () => {
      const res = await h.retrieve(key, created.body.id);
      expect(res.body.status).toBe('failed');
      return res.body;
    }, 300);
    expect(failed.error.code).toBe('timeout');
    expect(failed.progress).toBeGreaterThan(0);
    await h.eventually(async () => expect(await h.balance(key)).toMatchObject({ available: 10, reserved: 0 }));
    expect((await h.ledgerFor(orgId, created.body.id)).map((e) => e.type).sort()).toEqual(['release', 'reservation']);
  });
});
