import type { VideoReferenceType, VideoSeconds, VideoSize } from '@oc/contracts';

/** The fal endpoints this adapter can write input for: data only, so that routing does not load fal's client. */

const EVERY_LENGTH = ['4', '8', '12'] as const satisfies readonly VideoSeconds[];
const EVERY_SIZE = ['1280x720', '720x1280', '1792x1024', '1024x1792'] as const satisfies readonly VideoSize[];
const SIZES_720P = ['1280x720', '720x1280'] as const satisfies readonly VideoSize[];

/**
 * Prices as fal states them on 2026-11-27. Seedance is billed per video token, tokens = height x width x 24 fps x
 * seconds / 1024, so a second costs 21,600 tokens at 720p and 48,600 at 1080p.
 */
export const FAL_VIDEO_DEFAULTS = {
  'video-2': {
    model: 'fal-ai/bytedance/seedance/v1/pro/fast/text-to-video',
    seconds: EVERY_LENGTH,
    sizes: EVERY_SIZE,
    // $1 per million tokens: https://fal.ai/models/fal-ai/bytedance/seedance/v1/pro/fast/text-to-video/llms.txt
    cost_per_second_usd: 0.0216,
    cost_per_second_usd_1080p: 0.0486,
  },
  'video-2-pro': {
    model: 'fal-ai/bytedance/seedance/v1.5/pro/text-to-video',
    seconds: EVERY_LENGTH,
    sizes: EVERY_SIZE,
    // $2.4 per million tokens with audio, which the endpoint generates by default (`generate_audio: true`):
    // https://fal.ai/models/fal-ai/bytedance/seedance/v1.5/pro/text-to-video/llms.txt
    cost_per_second_usd: 0.05184,
    cost_per_second_usd_1080p: 0.11664,
  },
} as const;

/** Input schemas differ per model family; within a family only the lengths and resolutions on offer do. */
export type Family = 'seedance' | 'veo';

export interface Endpoint {
  family: Family;
  seconds: readonly VideoSeconds[];
  sizes: readonly VideoSize[];
  /**
   * Its image-to-video sibling, which takes the same input plus `image_url`; a job with an image is submitted
   * there. Status and result are asked on the owner and app only (`{owner}/{app}/requests/{id}`), which the two
   * share, so the job is polled as any other.
   */
  imageToVideo?: string;
}

/**
 * The endpoints whose input this adapter can write, with the lengths and sizes each takes exactly (the customer
 * pays per second, so a length is never rounded). Schemas: @fal-ai/client 1.10.1's `types/endpoints.d.ts` and the
 * endpoints' llms.txt pages on fal.ai.
 */
export const ENDPOINTS = new Map<string, Endpoint>([
  // duration "2".."12", resolution 480p/720p/1080p.
  [
    'fal-ai/bytedance/seedance/v1/pro/fast/text-to-video',
    { family: 'seedance', seconds: EVERY_LENGTH, sizes: EVERY_SIZE, imageToVideo: 'fal-ai/bytedance/seedance/v1/pro/fast/image-to-video' },
  ],
  [
    'fal-ai/bytedance/seedance/v1/pro/text-to-video',
    { family: 'seedance', seconds: EVERY_LENGTH, sizes: EVERY_SIZE, imageToVideo: 'fal-ai/bytedance/seedance/v1/pro/image-to-video' },
  ],
  // duration "4".."12", resolution 480p/720p/1080p.
  [
    'fal-ai/bytedance/seedance/v1.5/pro/text-to-video',
    { family: 'seedance', seconds: EVERY_LENGTH, sizes: EVERY_SIZE, imageToVideo: 'fal-ai/bytedance/seedance/v1.5/pro/image-to-video' },
  ],
  // duration "auto" or "4".."15", resolution 480p/720p only:
  // https://fal.ai/models/bytedance/seedance-2.0/fast/text-to-video/llms.txt
  ['bytedance/seedance-2.0/fast/text-to-video', { family: 'seedance', seconds: EVERY_LENGTH, sizes: SIZES_720P }],
  // duration "4s"/"6s"/"8s", resolution 720p/1080p. fal's schema names no tie between 1080p and a length (Google's
  // own API allows 1080p at 8 s only); unconfirmed on fal.
  ['fal-ai/veo3.1', { family: 'veo', seconds: ['4', '8'], sizes: EVERY_SIZE, imageToVideo: 'fal-ai/veo3.1/image-to-video' }],
  ['fal-ai/veo3.1/fast', { family: 'veo', seconds: ['4', '8'], sizes: EVERY_SIZE, imageToVideo: 'fal-ai/veo3.1/fast/image-to-video' }],
]);

/**
 * What images an endpoint with an image-to-video sibling takes. The image goes inline as a data URL in `image_url`
 * ("Models also accept base64-encoded data URIs": https://docs.fal.ai/documentation/model-apis/fal-cdn), so no
 * upload to fal's CDN is made; JPEG and PNG only, WebP not being claimed for these endpoints.
 */
export function falImageTypes(model: string): readonly VideoReferenceType[] {
  return ENDPOINTS.get(model)?.imageToVideo ? ['image/jpeg', 'image/png'] : [];
}

/** Seedance takes the bare number as a string ("8"), Veo the number with its unit ("8s"). */
export const DURATION: Record<Family, (seconds: VideoSeconds) => string> = {
  seedance: (seconds) => seconds,
  veo: (seconds) => `${seconds}s`,
};

/** Our sizes as aspect ratio and resolution tier; fal renders 1080p as 1920x1080 (or 1080x1920), not 1792x1024. */
export const FRAMES: Record<VideoSize, { aspect_ratio: '16:9' | '9:16'; resolution: '720p' | '1080p' }> = {
  '1280x720': { aspect_ratio: '16:9', resolution: '720p' },
  '720x1280': { aspect_ratio: '9:16', resolution: '720p' },
  '1792x1024': { aspect_ratio: '16:9', resolution: '1080p' },
  '1024x1792': { aspect_ratio: '9:16', resolution: '1080p' },
};

/** What a fal endpoint can generate, or undefined when this adapter cannot map a job onto it. */
export function falVideoCapabilities(model: string): { seconds: string[]; sizes: string[] } | undefined {
  const endpoint = ENDPOINTS.get(model);
  return endpoint && { seconds: [...endpoint.seconds], sizes: [...endpoint.sizes] };
}
