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
const services = {
  async request<T>(subject: string, payload: any): Promise<Reply<T>> {
    switch (subject) {
      case Subjects.billing.authenticate:
        return ok({ key_id: 'key_1', org_id: 'org_1', mode: 'live', scopes: ['video:read'], rate_limit_per_minute: 1000, tier: 'premium', limits: TIER_LIMITS.premium, expires_at: null } as T);
      case Subjects.video.describeContent:
        if (payload.video_id !== 'video_1') return fail(notFound('video_not_found', 'No video.'));
        return ok({ content_type: 'video/mp4', size: file.length } as T);
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
