import type { VideoReferenceType, VideoSeconds, VideoSize } from '@oc/contracts';

/**
 * The models we know how to ask, by input family. Schemas are each model's API page on replicate.com
 * (`/versions/<id>/api`), read 2026-11-27 in a stored copy:
 * - Seedance 2.0 and 2.0 Fast: `duration` integer -1..15, `resolution` (default 720p), `aspect_ratio`
 *   (default 16:9). The enums are not printed there; 480p/720p for Fast and 480p/720p/1080p for 2.0 are
 *   from a third party's capture of the live OpenAPI schema (2026-06-04), not confirmed on replicate.com.
 * - Kling v3 Video: `duration` integer 3..15, `mode` 'standard' = 720p / 'pro' = 1080p, `aspect_ratio` 16:9.
 *   9:16 is not printed on the page; third-party mirrors of the schema list 16:9, 9:16, 1:1.
 * Durations are ranges, so each of our lengths is sent exactly as asked, never rounded.
 */
const MODELS = {
  'bytedance/seedance-2.0-fast': { family: 'seedance-2', seconds: ['4', '8', '12'], sizes: ['1280x720', '720x1280'] },
  'bytedance/seedance-2.0': {
    family: 'seedance-2',
    seconds: ['4', '8', '12'],
    sizes: ['1280x720', '720x1280', '1792x1024', '1024x1792'],
  },
  'kwaivgi/kling-v3-video': {
    family: 'kling-v3',
    seconds: ['4', '8', '12'],
    sizes: ['1280x720', '720x1280', '1792x1024', '1024x1792'],
  },
} as const satisfies Record<string, { family: 'seedance-2' | 'kling-v3'; seconds: readonly VideoSeconds[]; sizes: readonly VideoSize[] }>;

export type KnownModel = keyof typeof MODELS;
export type ModelSpec = (typeof MODELS)[KnownModel];

export const REPLICATE_VIDEO_DEFAULTS = {
  'video-2': {
    model: 'bytedance/seedance-2.0-fast',
    seconds: MODELS['bytedance/seedance-2.0-fast'].seconds,
    sizes: MODELS['bytedance/seedance-2.0-fast'].sizes,
    // 720p without video input. NOT confirmed on https://replicate.com/bytedance/seedance-2.0-fast itself: a
    // third-party cost table citing that page (and another noting "$0.07–0.17/s") is all the search found.
    cost_per_second_usd: 0.13,
  },
  'video-2-pro': {
    model: 'kwaivgi/kling-v3-video',
    seconds: MODELS['kwaivgi/kling-v3-video'].seconds,
    sizes: MODELS['kwaivgi/kling-v3-video'].sizes,
    // Without audio, as https://lumenfall.ai/models/kuaishou/kling-v3 lists Replicate (2026-03-13); NOT confirmed on
    // https://replicate.com/kwaivgi/kling-v3-video. Likely the 1080p ('pro') rate, so the 720p jobs may cost less.
    cost_per_second_usd: 0.168,
  },
} as const;

/**
 * The input that takes the first frame, and the images it takes: Seedance 2.0's `image` ("Input image for
 * image-to-video generation (first frame)", types not stated, so JPEG and PNG) and Kling v3's `start_image`
 * ("Supports .jpg/.jpeg/.png, max 10MB"), per the models' API pages. The image goes as a data URL, which
 * Replicate takes for files under 1 MB (https://replicate.com/docs/topics/predictions/input-files).
 */
export const FIRST_FRAME = {
  'seedance-2': { input: 'image', types: ['image/jpeg', 'image/png'] },
  'kling-v3': { input: 'start_image', types: ['image/jpeg', 'image/png'] },
} as const satisfies Record<ModelSpec['family'], { input: string; types: readonly VideoReferenceType[] }>;

export function replicateImageTypes(model: string): readonly VideoReferenceType[] {
  const spec = specOf(model);
  return spec ? FIRST_FRAME[spec.family].types : [];
}

/** Which of our lengths and sizes a Replicate model can make exactly; undefined for a model we cannot map. */
export function replicateVideoCapabilities(model: string): { seconds: string[]; sizes: string[] } | undefined {
  const spec = specOf(model);
  return spec && { seconds: [...spec.seconds], sizes: [...spec.sizes] };
}

export function specOf(model: string): ModelSpec | undefined {
  return Object.hasOwn(MODELS, model) ? MODELS[model as KnownModel] : undefined;
}

/** 1792x1024 and 1024x1792 are sold as the 1080p tier: the models have no 1024p. */
export const SHAPES: Record<VideoSize, { aspectRatio: '16:9' | '9:16'; tier: '720p' | '1080p' }> = {
  '1280x720': { aspectRatio: '16:9', tier: '720p' },
  '720x1280': { aspectRatio: '9:16', tier: '720p' },
  '1792x1024': { aspectRatio: '16:9', tier: '1080p' },
  '1024x1792': { aspectRatio: '9:16', tier: '1080p' },
};
