import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { ManualClock, ok, notFound, fail, type Reply, Subjects, TIER_LIMITS, VIDEO_CONTENT_CHUNK_BYTES } from '@oc/contracts';
import type { ServiceClient } from '@oc/messaging';
import { createLogger } from '@oc/telemetry';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyAuthenticator } from '../src/application/authenticator';
import { KeyUsageRecorder } from '../src/application/key-usage';
import { RateLimits } from '../src/application/rate-limits';
import { createGatewayApp } from '../src/transport/http';
import { parseRange, videoRoutes } from '../src/transport/video-routes';

/** A file larger than three chunks, served by a stand-in video service that counts the slices asked for. */
const file = randomBytes(VIDEO_CONTENT_CHUNK_BYTES * 2 + 12_345);
const reads: { offset: number; length: number }[] = [];
/** What the gateway asked the video service to create. */
const creates: any[] = [];
/** A video as the video service answers it, in the given state. */
const video = (id: string, status: 'queued' | 'in_progress' | 'completed' | 'failed') => ({
  id,
  object: 'video',
  created: 1_795_360_150,
  created_at: 1_795_360_150,
  model: 'video-2',
  prompt: 'A paper boat drifting down a rainy street',
  status,
  progress: status === 'completed' ? 100 : status === 'queued' ? 0 : 40,
  seconds: '4',
  size: '1280x720',
  url: null,
  error: null,
  'x-cost': { amount: 0.4, currency: 'usd' },
  'x-storage-provider': 'upstream',
  'x-persisted': false,
  remixed_from_video_id: null,
  completed_at: null,
  expires_at: null,
});
const services = {
  async request<T>(subject: string, payload: any): Promise<Reply<T>> {
    switch (subject) {
      case Subjects.billing.authenticate:
        return ok({ key_id: 'key_1', org_id: 'org_1', mode: 'live', scopes: ['video:read', 'video:write'], rate_limit_per_minute: 1000, tier: 'premium', limits: TIER_LIMITS.premium, expires_at: null } as T);
      case Subjects.video.describeContent:
        if (payload.video_id !== 'video_1') return fail(notFound('video_not_found', 'No video.'));
        return ok({ content_type: 'video/mp4', size: file.length } as T);
      case Subjects.video.create:
        creates.push(payload);
        return ok({ video: video('video_new', 'queued'), poll_after_ms: 5_000 } as T);
      case Subjects.video.get:
        if (payload.video_id === 'video_running') return ok({ video: video(payload.video_id, 'in_progress'), poll_after_ms: 12_000 } as T);
        if (payload.video_id === 'video_done') return ok({ video: video(payload.video_id, 'completed'), poll_after_ms: null } as T);
        return fail(notFound('video_not_found', 'No video.'));
      case Subjects.video.readContent:
        reads.push({ offset: payload.offset, length: payload.length });
        return ok({ data: file.subarray(payload.offset, payload.offset + payload.length).toString('base64') } as T);
      default:
        return ok({} as T);
    }
  },
} as unknown as ServiceClient;

let server: Server;
let url: string;
beforeAll(async () => {
  const clock = new ManualClock();
  const app = createGatewayApp({
    services,
    authenticator: new KeyAuthenticator(services, clock),
    limits: RateLimits.inMemory(),
    usage: new KeyUsageRecorder(services, clock),
    clock,
    logger: createLogger({ service: 'gateway-test', level: 'silent' }),
    adminToken: 'admin-token-for-tests',
    version: '1.2.3',
    v1: videoRoutes(),
    admin: [],
    ready: async () => undefined,
  });
  server = await new Promise<Server>((resolve) => {
    const s = createServer(app).listen(0, '127.0.0.1', () => resolve(s));
  });
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/videos/video_1/content`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const get = (headers: Record<string, string> = {}, target = url) =>
  fetch(target, { headers: { authorization: `Bearer oc_live_${'A'.repeat(43)}`, ...headers } });

describe('video content through the gateway', () => {
  it('streams a file of several chunks whole, asking for slices no larger than the chunk size', async () => {
    reads.length = 0;
    const res = await get();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-length')).toBe(String(file.length));
    expect(Buffer.from(await res.arrayBuffer())).toEqual(file);
    expect(reads.map((r) => r.offset)).toEqual([0, VIDEO_CONTENT_CHUNK_BYTES, 2 * VIDEO_CONTENT_CHUNK_BYTES]);
    expect(reads.every((r) => r.length <= VIDEO_CONTENT_CHUNK_BYTES)).toBe(true);
  });

  it('serves a range across a chunk boundary with 206 and Content-Range', async () => {
    const start = VIDEO_CONTENT_CHUNK_BYTES - 100;
    const res = await get({ range: `bytes=${start}-${start + 299}` });
    expect(res.status).toBe(206);
    expect(res.headers.get('content-range')).toBe(`bytes ${start}-${start + 299}/${file.length}`);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(file.subarray(start, start + 300));
  });

  it('passes the video service’s 404 through and refuses an unknown variant before asking it', async () => {
    const missing = await get({}, url.replace('video_1', 'video_2'));
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as any).error.code).toBe('video_not_found');
    const variant = await get({}, `${url}?variant=spritesheet`);
    expect(variant.status).toBe(400);
    expect(((await variant.json()) as any).error).toMatchObject({ code: 'invalid_variant', param: 'variant' });
  });
});

describe('video reads through the gateway', () => {
  const videos = () => url.replace('/video_1/content', '');
  const read = (id: string) => get({}, `${videos()}/${id}`);

  it('answers the video alone, and says when to read it again while it runs, as openai-poll-after-ms', async () => {
    const running = await read('video_running');
    expect(running.status).toBe(200);
    expect(running.headers.get('openai-poll-after-ms')).toBe('12000');
    expect(await running.json()).toEqual(video('video_running', 'in_progress'));
    const created = await fetch(videos(), {
      method: 'POST',
      headers: { authorization: `Bearer oc_live_${'A'.repeat(43)}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'video-2', prompt: 'A paper boat drifting down a rainy street', seconds: '4', size: '1280x720' }),
    });
    expect(created.headers.get('openai-poll-after-ms')).toBe('5000');
    expect(((await created.json()) as any).id).toBe('video_new');
  });

  it('sends no openai-poll-after-ms once the video has ended, nor on an error', async () => {
    const done = await read('video_done');
    expect(done.status).toBe(200);
    expect(done.headers.get('openai-poll-after-ms')).toBeNull();
    const missing = await read('video_gone');
    expect(missing.status).toBe(404);
    expect(missing.headers.get('openai-poll-after-ms')).toBeNull();
  });
});

describe('input_reference on POST /v1/videos', () => {
  const PNG = Buffer.concat([Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex'), Buffer.alloc(100, 1)]);
  const fields = { model: 'video-2', prompt: 'A paper boat drifting down a rainy street', seconds: '4', size: '1280x720' };
  const post = (body: FormData | string, json = false) =>
    fetch(url.replace('/video_1/content', ''), {
      method: 'POST',
      headers: { authorization: `Bearer oc_live_${'A'.repeat(43)}`, ...(json ? { 'content-type': 'application/json' } : {}) },
      body,
    }).then(async (res) => ({ status: res.status, body: (await res.json()) as any }));
  const form = (reference?: (form: FormData) => void) => {
    const f = new FormData();
    for (const [name, value] of Object.entries(fields)) f.set(name, value);
    reference?.(f);
    return f;
  };

  it('takes the image as a file part or a data: URL, typed by its bytes, and hands it on as base64', async () => {
    creates.length = 0;
    // Declared as JPEG: what counts is what its bytes are.
    expect((await post(form((f) => f.set('input_reference', new Blob([PNG], { type: 'image/jpeg' }), 'ref.jpg')))).status).toBe(200);
    expect((await post(form((f) => f.set('input_reference[image_url]', `data:image/png;base64,${PNG.toString('base64')}`)))).status).toBe(200);
    expect((await post(JSON.stringify({ ...fields, input_reference: { image_url: `data:image/png;base64,${PNG.toString('base64')}` } }), true)).status).toBe(200);
    expect(creates.map((c) => c.input_reference)).toEqual(Array(3).fill({ content_type: 'image/png', data: PNG.toString('base64') }));
    expect(creates[0]).toMatchObject({ ...fields, org_id: 'org_1', mode: 'live' });
  });

  it.each([
    ['an https URL, which is never fetched', (f: FormData) => f.set('input_reference[image_url]', 'https://example.com/a.png'), 'unsupported_parameter', 'input_reference.image_url'],
    ['a file id', (f: FormData) => f.set('input_reference[file_id]', 'file_123'), 'unsupported_parameter', 'input_reference.file_id'],
    ['a file that is no image', (f: FormData) => f.set('input_reference', new Blob(['GIF89a…'], { type: 'image/png' }), 'a.png'), 'invalid_parameter', 'input_reference'],
    ['an empty file', (f: FormData) => f.set('input_reference', new Blob([]), 'a.png'), 'invalid_parameter', 'input_reference'],
    ['an image over 512 KiB', (f: FormData) => f.set('input_reference', new Blob([PNG, Buffer.alloc(512 * 1024)]), 'a.png'), 'invalid_parameter', 'input_reference'],
    ['a data: URL that is not base64', (f: FormData) => f.set('input_reference[image_url]', 'data:image/png,not-base64'), 'invalid_parameter', 'input_reference.image_url'],
    ['two images', (f: FormData) => (f.append('input_reference', new Blob([PNG]), 'a.png'), f.append('input_reference', new Blob([PNG]), 'b.png')), 'invalid_parameter', 'input_reference'],
    ['a file under another name', (f: FormData) => f.set('reference_image', new Blob([PNG]), 'a.png'), 'unsupported_parameter', 'reference_image'],
  ])('refuses %s with 400, naming the parameter, asking the video service nothing', async (_, add, code, param) => {
    creates.length = 0;
    const refused = await post(form(add));
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ type: 'invalid_request_error', code, param });
    expect(creates).toEqual([]);
  });
});

describe('parseRange', () => {
  it.each([
    [undefined, null],
    ['bytes=0-9', { start: 0, end: 9 }],
    ['bytes=90-', { start: 90, end: 99 }],
    ['bytes=-10', { start: 90, end: 99 }],
    ['bytes=95-200', { start: 95, end: 99 }],
    ['bytes=100-', 'unsatisfiable'],
    ['bytes=-0', 'unsatisfiable'],
    ['bytes=5-2', 'unsatisfiable'],
    ['items=0-9', null],
  ] as const)('reads %s of a 100-byte file as %j', (header, expected) => {
    expect(parseRange(header, 100)).toEqual(expected);
  });
});
