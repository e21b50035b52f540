import {
  ApiError,
  CREATE_VIDEO_CODES,
  CreateVideoBody,
  CreateVideoForm,
  DeletedVideoSchema,
  IdempotencyKeySchema,
  invalidRequest,
  ListVideosQuery,
  ok,
  parseOrThrow,
  RemixVideoBody,
  Subjects,
  unwrap,
  VIDEO_CONTENT_CHUNK_BYTES,
  type VideoContentCopy,
  type VideoContentInfo,
  VideoContentQuery,
  VideoListSchema,
  type VideoRead,
  VideoSchema,
} from '@oc/contracts';
import { takeInputReference } from './input-reference';
import type { Route, RouteContext } from './routes';

/** `Idempotency-Key` as Stripe defines it; absent means every POST creates a new video. */
function idempotencyKey(ctx: RouteContext): { idempotency_key?: string } {
  const raw = ctx.req.headers['idempotency-key'];
  if (raw === undefined) return {};
  const parsed = IdempotencyKeySchema.safeParse(raw);
  if (!parsed.success) throw invalidRequest('invalid_idempotency_key', 'Idempotency-Key must be 1 to 255 characters.', 'Idempotency-Key');
  return { idempotency_key: parsed.data };
}

const caller = (ctx: RouteContext) => ({ org_id: ctx.principal.org_id, mode: ctx.principal.mode, key_id: ctx.principal.key_id });

const POLL_AFTER = {
  'openai-poll-after-ms': 'While the video is queued or in progress: milliseconds to wait before reading it again (5000 or more)',
};

/**
 * Asks the video service for a video and answers it, with OpenAI's `openai-poll-after-ms` while it runs: the
 * SDKs' poll helpers wait that long between reads (a second without it).
 */
async function readVideo(ctx: RouteContext, subject: string, payload: unknown) {
  const { video, poll_after_ms } = unwrap(await ctx.services.request<VideoRead>(subject, payload, { headers: ctx.headers }));
  if (poll_after_ms !== null) ctx.res.setHeader('openai-poll-after-ms', String(poll_after_ms));
  return ok(video);
}

/** One `bytes=` range (RFC 9110): `a-b`, `a-` or `-n`; null when absent, 'unsatisfiable' when it cannot be served. */
export function parseRange(header: string | undefined, size: number): { start: number; end: number } | null | 'unsatisfiable' {
  if (!header) return null;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return null;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size || end < start) return 'unsatisfiable';
  return { start, end };
}

/**
 * Streams a file from the video service in bounded base64 chunks over request/reply: the gateway never
 * opens storage itself. Headers (type, length, range) are decided from a first describe call.
 */
async function sendContent(ctx: RouteContext, copy: VideoContentCopy): Promise<void> {
  const { variant } = parseOrThrow(VideoContentQuery, ctx.query, { variant: 'invalid_variant' });
  const ref = { org_id: ctx.principal.org_id, video_id: ctx.params.id!, variant, copy };
  const info = unwrap(
    await ctx.services.request<VideoContentInfo>(Subjects.video.describeContent, ref, { headers: ctx.headers }),
  );
  const { res } = ctx;
  const range = parseRange(ctx.req.headers.range, info.size);
  res.setHeader('Accept-Ranges', 'bytes');
  if (range === 'unsatisfiable') {
    res.setHeader('Content-Range', `bytes */${info.size}`);
    throw new ApiError({
      status: 416,
      type: 'invalid_request_error',
      code: 'range_not_satisfiable',
      message: `The requested range is outside the ${info.size}-byte file.`,
      param: 'Range',
    });
  }
  const start = range?.start ?? 0;
  const end = range?.end ?? info.size - 1;
  res.statusCode = range ? 206 : 200;
  res.setHeader('Content-Type', info.content_type);
  res.setHeader('Content-Length', String(end - start + 1));
  if (range) res.setHeader('Content-Range', `bytes ${start}-${end}/${info.size}`);
  for (let offset = start; offset <= end; offset += VIDEO_CONTENT_CHUNK_BYTES) {
    const length = Math.min(VIDEO_CONTENT_CHUNK_BYTES, end - offset + 1);
    const chunk = unwrap(
      await ctx.services.request<{ data: string }>(Subjects.video.readContent, { ...ref, offset, length }, { headers: ctx.headers }),
    );
    if (!res.write(Buffer.from(chunk.data, 'base64'))) {
      // A client that goes away never drains: stop on close as well.
      await new Promise<void>((resolve) => {
        const done = () => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.on('drain', done);
        res.on('close', done);
      });
    }
    if (res.destroyed) return;
  }
  res.end();
}

/** The `/v1/videos` surface, mirroring OpenAI's Videos API. */
export function videoRoutes(): Route[] {
  return [
    {
      method: 'POST',
      path: '/v1/videos',
      scope: 'video:write',
      model: true,
      body: 'json-or-multipart',
      files: ['input_reference'],
      doc: {
        summary: 'Create a video job (JSON or multipart/form-data, input_reference an image file part or a data: URL; Idempotency-Key honoured)',
        request: CreateVideoBody,
        form: CreateVideoForm,
        response: VideoSchema,
        idempotent: true,
        errors: [402, 422],
        headers: POLL_AFTER,
      },
      handle: (ctx) => {
        const { body, reference } = takeInputReference(ctx.body);
        const request = parseOrThrow(CreateVideoBody, body, CREATE_VIDEO_CODES);
        return readVideo(ctx, Subjects.video.create, { ...request, ...(reference ? { input_reference: reference } : {}), ...caller(ctx), ...idempotencyKey(ctx) });
      },
    },
    {
      method: 'GET',
      path: '/v1/videos',
      scope: 'video:read',
      doc: { summary: "List the organization's videos with cursor pagination", query: ListVideosQuery, response: VideoListSchema },
      handle: (ctx) =>
        ctx.services.request(
          Subjects.video.list,
          { ...parseOrThrow(ListVideosQuery, ctx.query), org_id: ctx.principal.org_id },
          { headers: ctx.headers },
        ),
    },
    {
      method: 'GET',
      path: '/v1/videos/:id',
      scope: 'video:read',
      doc: { summary: 'Retrieve a video', response: VideoSchema, errors: [410], headers: POLL_AFTER },
      handle: (ctx) => readVideo(ctx, Subjects.video.get, { org_id: ctx.principal.org_id, video_id: ctx.params.id }),
    },
    {
      method: 'DELETE',
      path: '/v1/videos/:id',
      scope: 'video:delete',
      doc: { summary: 'Delete a video and its files; a running job is cancelled and refunded', response: DeletedVideoSchema },
      handle: (ctx) =>
        ctx.services.request(Subjects.video.delete, { org_id: ctx.principal.org_id, video_id: ctx.params.id }, { headers: ctx.headers }),
    },
    {
      method: 'POST',
      path: '/v1/videos/:id/remix',
      scope: 'video:write',
      body: 'json-or-multipart',
      doc: {
        summary: 'Remix a completed video with a new prompt',
        request: RemixVideoBody,
        response: VideoSchema,
        idempotent: true,
        errors: [402, 410, 422],
        headers: POLL_AFTER,
      },
      handle: (ctx) =>
        readVideo(ctx, Subjects.video.remix, { ...parseOrThrow(RemixVideoBody, ctx.body, { prompt: 'invalid_prompt' }), ...caller(ctx), video_id: ctx.params.id, ...idempotencyKey(ctx) }),
    },
    {
      method: 'GET',
      path: '/v1/videos/:id/content',
      scope: 'video:read',
      doc: {
        summary: 'Download the MP4 (or the WebP thumbnail); single byte ranges served',
        query: VideoContentQuery,
        media: ['video/mp4', 'image/webp'],
        ranges: true,
        errors: [410],
      },
      handle: (ctx) => sendContent(ctx, 'current'),
    },
    {
      method: 'GET',
      path: '/v1/videos/:id/content/temporary',
      scope: 'video:read',
      doc: {
        summary: "The temporary URL a completed video's url names at first: the file, for an hour after completion, then 410",
        query: VideoContentQuery,
        media: ['video/mp4', 'image/webp'],
        ranges: true,
        errors: [410],
      },
      handle: (ctx) => sendContent(ctx, 'temporary'),
    },
    {
      method: 'GET',
      path: '/v1/videos/:id/content/permanent',
      scope: 'video:read',
      doc: {
        summary: "The permanent copy a persisted video's url names when no CDN fronts the object store",
        query: VideoContentQuery,
        media: ['video/mp4', 'image/webp'],
        ranges: true,
        errors: [410],
      },
      handle: (ctx) => sendContent(ctx, 'permanent'),
    },
  ];
}
