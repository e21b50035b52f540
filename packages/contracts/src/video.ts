import { z } from 'zod';
import { PublicModelIdSchema } from './model-id';
import { ApiError } from './errors';
import { VideoNotifications } from './video-events';

/** The spec's video models; an operator's catalog may add public video models of its own (`videoModelsOf`). */
export const VIDEO_MODELS = ['video-2', 'video-2-pro'] as const;
export const VIDEO_SIZES = ['1280x720', '720x1280', '1024x1792', '1792x1024'] as const;
export const VIDEO_SECONDS = ['4', '8', '12'] as const;
export const VIDEO_STATUSES = ['queued', 'in_progress', 'completed', 'failed'] as const;
export const VIDEO_FAILURE_CODES = ['content_policy_violation', 'generation_failed', 'timeout', 'insufficient_quota'] as const;
/**
 * What the organization pays for a video (`x-billing`): its `x-cost` held while it is made (`reserved`), taken
 * (`charged`) or given back (`released`: it failed); `test`: made with a test key, never charged.
 */
export const VIDEO_BILLING_STATES = ['reserved', 'charged', 'released', 'test'] as const;
/** OpenAI's download variants; `spritesheet` is refused with 400 because no sprite sheet is produced. */
export const VIDEO_CONTENT_VARIANTS = ['video', 'thumbnail'] as const;

export type SpecVideoModel = (typeof VIDEO_MODELS)[number];
/** A public video model id: one of the spec's, or one of the operator's catalog; the video service knows which it serves. */
export type VideoModel = string;
export const isSpecVideoModel = (model: string): model is SpecVideoModel => (VIDEO_MODELS as readonly string[]).includes(model);
export type VideoSize = (typeof VIDEO_SIZES)[number];
export type VideoSeconds = (typeof VIDEO_SECONDS)[number];
export type VideoStatus = (typeof VIDEO_STATUSES)[number];
export type VideoFailureCode = (typeof VIDEO_FAILURE_CODES)[number];
export type VideoBilling = (typeof VIDEO_BILLING_STATES)[number];
export type VideoContentVariant = (typeof VIDEO_CONTENT_VARIANTS)[number];

const Prompt = z.string().min(10).max(500);

// ---------- HTTP bodies and queries ----------

/** Which model ids exist is the video service's to say (the spec's and its catalog's): the gateway checks the form only. */
const VideoModelId = PublicModelIdSchema;

/** The image types an `input_reference` may be, as its first bytes tell them (never as the client names them). */
export const VIDEO_REFERENCE_TYPES = ['image/jpeg', 'image/png', 'image/webp'] as const;
export type VideoReferenceType = (typeof VIDEO_REFERENCE_TYPES)[number];

/**
 * The largest `input_reference` image. It travels inline, as base64, in one message to the video service (NATS
 * carries 1 MiB by default) and on to the provider (Replicate advises data URLs under 1 MB), and fits in the
 * 1 MiB request body.
 */
export const VIDEO_REFERENCE_MAX_BYTES = 512 * 1024;

/**
 * OpenAI's JSON form of `input_reference` (`{image_url}` or `{file_id}`); a multipart body may send the image as
 * a file part instead. Which forms are taken is the gateway's to say (`docs/video.md`).
 */
export const InputReferenceParam = z.strictObject({ image_url: z.string().optional(), file_id: z.string().optional() });

/** An `input_reference` image as the gateway hands it on: its bytes, checked to be of the type named. */
export const VideoReferenceSchema = z.object({
  content_type: z.enum(VIDEO_REFERENCE_TYPES),
  data: z.base64().max(Math.ceil(VIDEO_REFERENCE_MAX_BYTES / 3) * 4),
});
export type VideoReference = z.infer<typeof VideoReferenceSchema>;

/** What the video's stream records of its image: never the bytes, which stay in the file store. */
export const VideoReferenceRecordSchema = z.object({
  content_type: z.enum(VIDEO_REFERENCE_TYPES),
  bytes: z.int().positive().max(VIDEO_REFERENCE_MAX_BYTES),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});
export type VideoReferenceRecord = z.infer<typeof VideoReferenceRecordSchema>;

const CreateVideoFields = {
  model: VideoModelId,
  prompt: Prompt,
  seconds: z.enum(VIDEO_SECONDS, { error: "seconds must be '4', '8' or '12' (a string)" }),
  size: z.enum(VIDEO_SIZES, { error: `size must be one of ${VIDEO_SIZES.join(', ')}` }),
};

/** The create's body as a client sends it; `input_reference` is the image to start from (image-to-video). */
export const CreateVideoBody = z.strictObject({ ...CreateVideoFields, input_reference: InputReferenceParam.optional() });
/** The same as a form (multipart/form-data), as OpenAI's SDKs send it: the image may be a file part. For the OpenAPI document. */
export const CreateVideoForm = z.strictObject({
  ...CreateVideoFields,
  input_reference: z.union([z.file().max(VIDEO_REFERENCE_MAX_BYTES).mime([...VIDEO_REFERENCE_TYPES]), InputReferenceParam]).optional(),
});
/** What is generated: the body's fields, the image aside (it travels as a `VideoReference`). */
export type CreateVideoRequest = Omit<z.infer<typeof CreateVideoBody>, 'input_reference'>;

/** The spec's codes per parameter: `invalid_model`, `invalid_seconds`; a missing one is `missing_parameter`. */
export const CREATE_VIDEO_CODES = {
  model: 'invalid_model',
  seconds: 'invalid_seconds',
  size: 'invalid_size',
  prompt: 'invalid_prompt',
} as const;

export const RemixVideoBody = z.strictObject({ prompt: Prompt });

export const ListVideosQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  after: z.string().min(1).max(200).optional(),
  order: z.enum(['asc', 'desc']).default('desc'),
});

export const VideoContentQuery = z.object({
  variant: z.enum(VIDEO_CONTENT_VARIANTS, { error: "variant must be 'video' or 'thumbnail'" }).default('video'),
});

/** Stripe's header, at most this long. */
export const IdempotencyKeySchema = z.string().min(1).max(255);

// ---------- The video resource ----------

export const VideoCostSchema = z.object({ amount: z.number(), currency: z.literal('usd') });

export const VideoSchema = z.object({
  id: z.string(),
  object: z.literal('video'),
  created: z.int(),
  /** `created` under OpenAI's name, which its SDKs read: the same second. */
  created_at: z.int(),
  model: z.string(),
  prompt: z.string(),
  status: z.enum(VIDEO_STATUSES),
  progress: z.int().min(0).max(100),
  seconds: z.enum(VIDEO_SECONDS),
  size: z.enum(VIDEO_SIZES),
  url: z.string().nullable(),
  error: z.object({ code: z.string(), message: z.string() }).nullable(),
  'x-cost': VideoCostSchema,
  /** Whether `x-cost` is what the organization pays: the price of a test key's or a failed video is never charged. */
  'x-billing': z.enum(VIDEO_BILLING_STATES),
  'x-storage-provider': z.enum(['upstream', 'object_store']),
  'x-persisted': z.boolean(),
  remixed_from_video_id: z.string().nullable(),
  completed_at: z.int().nullable(),
  /** When the temporary file goes away unless persisted first; null once persisted or before completion. */
  expires_at: z.int().nullable(),
});
export type Video = z.infer<typeof VideoSchema>;

/** The spec: clients poll a running video no more often than every 5 seconds. */
export const VIDEO_MIN_POLL_MS = 5_000;

/**
 * The video service's answer to a create, a remix or a read: the video, and while it runs how long a client
 * should wait before reading it again (OpenAI's `openai-poll-after-ms`, which the gateway sends as a header).
 */
export const VideoReadSchema = z.object({ video: VideoSchema, poll_after_ms: z.int().min(VIDEO_MIN_POLL_MS).nullable() });
export type VideoRead = z.infer<typeof VideoReadSchema>;

export const DeletedVideoSchema = z.object({ id: z.string(), object: z.literal('video.deleted'), deleted: z.literal(true) });

export const VideoListSchema = z.object({
  object: z.literal('list'),
  data: z.array(VideoSchema),
  first_id: z.string().nullable(),
  last_id: z.string().nullable(),
  has_more: z.boolean(),
});

export const VideoContentInfoSchema = z.object({ content_type: z.string(), size: z.int().nonnegative() });
export type VideoContentInfo = z.infer<typeof VideoContentInfoSchema>;

/**
 * Which copy a content request names: `current` is OpenAI's download endpoint (whichever copy the video has);
 * `temporary` is the `url` of completion time, which serves for `VIDEO_TEMP_TTL_MS` after completion only;
 * `permanent` is the `url` of a persisted video when no CDN fronts the object store.
 */
export const VIDEO_CONTENT_COPIES = ['current', 'temporary', 'permanent'] as const;
export type VideoContentCopy = (typeof VIDEO_CONTENT_COPIES)[number];

/** Largest slice of a file one request/reply carries (base64 keeps it well under NATS's 1 MiB payload). */
export const VIDEO_CONTENT_CHUNK_BYTES = 256 * 1024;

export const contentPolicyViolation = (message: string) =>
  new ApiError({ status: 422, type: 'invalid_request_error', code: 'content_policy_violation', message, param: 'prompt' });

// ---------- NATS request/reply messages to the video service ----------

/** `key_id`: the API key asking, recorded with the video and its charge (absent from gateways of an earlier release). */
const Caller = { org_id: z.string().min(1), mode: z.enum(['live', 'test']), key_id: z.string().min(1).max(100).optional() };
const VideoRef = { org_id: z.string().min(1), video_id: z.string().min(1) };

/** What a video costs, per second of each size of each model served: a form can show a video's cost before it is made. */
export const VideoPriceListSchema = z.object({
  object: z.literal('list'),
  data: z.array(z.object({ model: z.string(), size: z.enum(VIDEO_SIZES), per_second: z.number().nonnegative() })),
});
export type VideoPriceList = z.infer<typeof VideoPriceListSchema>;

export const VideoMessages = {
  create: z.object({ ...CreateVideoFields, ...Caller, idempotency_key: IdempotencyKeySchema.optional(), input_reference: VideoReferenceSchema.optional() }),
  remix: RemixVideoBody.extend({ ...Caller, ...VideoRef, idempotency_key: IdempotencyKeySchema.optional() }),
  get: z.object(VideoRef),
  list: ListVideosQuery.extend({ org_id: z.string().min(1) }),
  delete: z.object(VideoRef),
  prices: z.object({}),
  describeContent: z.object({ ...VideoRef, variant: z.enum(VIDEO_CONTENT_VARIANTS), copy: z.enum(VIDEO_CONTENT_COPIES).default('current') }),
  readContent: z.object({
    ...VideoRef,
    variant: z.enum(VIDEO_CONTENT_VARIANTS),
    copy: z.enum(VIDEO_CONTENT_COPIES).default('current'),
    offset: z.int().nonnegative(),
    length: z.int().positive().max(VIDEO_CONTENT_CHUNK_BYTES),
  }),
} as const;
export type VideoMessage<K extends keyof typeof VideoMessages> = z.infer<(typeof VideoMessages)[K]>;

// ---------- Domain events of the video service (stream `video-<id>`) ----------

/**
 * The stream categories the video service writes (`video-<id>`; `videokey-<hash>`, one per organization and
 * Idempotency-Key): its outbox relay publishes these only.
 */
export const VideoStreams = { video: 'video', idempotencyKey: 'videokey' } as const;

const VideoKey = { org_id: z.string(), video_id: z.string() };

export const VideoEvents = {
  /** A create arrived; the video exists for clients only once `VideoQueued` says its funds are held. */
  VideoRequested: z.object({
    ...VideoKey,
    mode: z.enum(['live', 'test']),
    model: z.string(),
    prompt: z.string(),
    seconds: z.enum(VIDEO_SECONDS),
    size: z.enum(VIDEO_SIZES),
    cost_micros: z.int().nonnegative(),
    remixed_from_video_id: z.string().nullable(),
    /** The image it starts from, kept in the file store (absent in events written before images were taken). */
    input_reference: VideoReferenceRecordSchema.nullish(),
    /** Milliseconds; `created` of the resource is its Unix second. */
    requested_at: z.int(),
    idempotency_key: z.string().nullable(),
    request_hash: z.string().nullable(),
    /** The replica that runs the job (absent in events written before replicas). */
    replica: z.string().optional(),
    /** The API key that asked, named on the capture (absent in events written before captures named their key). */
    key_id: z.string().optional(),
  }),
  /** Another replica runs the job from now on: the one that did stopped (`previous`, null before replicas). */
  VideoJobTakenOver: z.object({ ...VideoKey, replica: z.string(), previous: z.string().nullable() }),
  /** Funds reserved (or a test key): the job is accepted, `queued`. */
  VideoQueued: z.object(VideoKey),
  /**
   * Never accepted: billing refused (402, nothing was held) or the create was abandoned midway (a reservation
   * may be held and is released).
   */
  VideoRejected: z.object({ ...VideoKey, reason: z.enum(['insufficient_quota', 'abandoned']) }),
  GenerationStarted: z.object({ ...VideoKey, provider: z.string(), upstream_id: z.string(), started_at: z.int() }),
  VideoProgressed: z.object({ ...VideoKey, progress: z.int().min(1).max(99) }),
  /** The file is in temporary (upstream) storage; comes right before `VideoCompleted`. */
  VideoStored: z.object({ ...VideoKey, completed_at: z.int(), bytes: z.int().nonnegative() }),
  VideoPersisted: z.object({ ...VideoKey, persisted_at: z.int(), url: z.string() }),
  /** The temporary file was dropped without having been persisted: the video answers 410 from now on. */
  VideoExpired: z.object({ ...VideoKey, expired_at: z.int() }),
  VideoCharged: z.object({ ...VideoKey, amount_micros: z.int().nonnegative() }),
  VideoRefunded: z.object({ ...VideoKey, amount_micros: z.int().nonnegative() }),
  VideoDeleted: z.object({ ...VideoKey, deleted_at: z.int() }),
  /**
   * On `videokey-<hash>`: an organization's Idempotency-Key now stands for this video (the first request
   * that used it, or one replacing a request that was never accepted), for 24 hours from `claimed_at` (ms).
   */
  VideoIdempotencyKeyClaimed: z.object({ ...VideoKey, request_hash: z.string(), claimed_at: z.int() }),
  ...VideoNotifications,
} as const;

export type VideoEventType = keyof typeof VideoEvents;
export type VideoEvent = {
  [K in VideoEventType]: { type: K; data: z.infer<(typeof VideoEvents)[K]> };
}[VideoEventType];
