import type { VideoReferenceType, VideoSeconds, VideoSize } from '@oc/contracts';

/** The Veo models the Gemini API serves as our video models: data only, so that routing does not load Google's SDK. */

// Veo 3.1 makes 4, 6 or 8 second clips ("Video length: 4, 6, or 8 seconds",
// https://cloud.google.com/vertex-ai/generative-ai/docs/models/veo/3-1-generate; the Gemini API guide's table was
// only seen through third-party copies saying the same): of our lengths 4 and 8, never 12. Both aspect ratios
// come in 720p and 1080p since 2026-01-13 (https://ai.google.dev/gemini-api/docs/changelog: "more support for
// portrait videos in all resolutions").
const VEO_31_SECONDS = ['4', '8'] as const;
const VEO_31_SIZES = ['1280x720', '720x1280', '1792x1024', '1024x1792'] as const;

/**
 * The Gemini API serves Veo 3.1 under preview ids only: the GA `-001` ids are Gemini Enterprise Agent Platform
 * models (https://ai.google.dev/gemini-api/docs/changelog, 2026-06-15). A third-party notice
 * (https://docs.apiyi.com/en/live/2026-10/veo-3-1-preview-retired) reports these preview ids shut down on
 * 2026-10-22; Google's own deprecations page could not be read to confirm it.
 */
export const GEMINI_VEO_VIDEO_DEFAULTS = {
  'video-2': {
    model: 'veo-3.1-fast-generate-preview',
    seconds: VEO_31_SECONDS,
    sizes: VEO_31_SIZES,
    // UNCONFIRMED: $0.15/s (720p and 1080p, audio included) by third-party copies of
    // https://ai.google.dev/gemini-api/docs/pricing from early 2026; others report a cut in April 2026. The
    // higher figure is kept until the official page is read.
    cost_per_second_usd: 0.15,
  },
  'video-2-pro': {
    model: 'veo-3.1-generate-preview',
    seconds: VEO_31_SECONDS,
    sizes: VEO_31_SIZES,
    // "Veo 3.1 Standard, video with audio: $0.40 (720p and 1080p)" per second,
    // https://ai.google.dev/gemini-api/docs/pricing as transcribed on 2026-10-07.
    cost_per_second_usd: 0.4,
  },
} as const;

export const CAPABILITIES: Record<string, { seconds: readonly string[]; sizes: readonly string[] }> = Object.fromEntries(
  Object.values(GEMINI_VEO_VIDEO_DEFAULTS).map((d) => [d.model, { seconds: d.seconds, sizes: d.sizes }]),
);

/**
 * Veo 3.1 starts a video from an image ("generate a video from an image", https://ai.google.dev/gemini-api/docs/video),
 * sent inline as `instances[0].image` {bytesBase64Encoded, mimeType} (the Gemini API request @google/genai builds:
 * generateVideosParametersToMldev and imageToMldev in its src/converters/_models_converters.ts). Google's examples
 * name image/png and image/jpeg; WebP is not claimed.
 */
export function geminiVeoImageTypes(model: string): readonly VideoReferenceType[] {
  return CAPABILITIES[model] ? ['image/jpeg', 'image/png'] : [];
}

/** What an upstream Veo model can make, of our lengths and sizes; undefined for a model not known here. */
export function geminiVeoVideoCapabilities(model: string): { seconds: string[]; sizes: string[] } | undefined {
  const capabilities = CAPABILITIES[model];
  return capabilities && { seconds: [...capabilities.seconds], sizes: [...capabilities.sizes] };
}

export const SHAPES: Record<VideoSize, { aspectRatio: '16:9' | '9:16'; resolution: '720p' | '1080p' }> = {
  '1280x720': { aspectRatio: '16:9', resolution: '720p' },
  '720x1280': { aspectRatio: '9:16', resolution: '720p' },
  '1792x1024': { aspectRatio: '16:9', resolution: '1080p' },
  '1024x1792': { aspectRatio: '9:16', resolution: '1080p' },
};

// Veo 3.1 makes 1080p only at 8 s, per third-party copies of the Veo parameter table (e.g.
// docs.modellix.ai/google/veo-3-1-fast-t2v); not confirmed on Google's page.
export const SECONDS_AT_1080P: VideoSeconds = '8';

/** Whether a known Veo model makes this length at this size (its lists, and 1080p only at 8 s); true for others. */
export function geminiVeoAccepts(model: string, seconds: VideoSeconds, size: VideoSize): boolean {
  if (!CAPABILITIES[model]) return true;
  return SHAPES[size].resolution !== '1080p' || seconds === SECONDS_AT_1080P;
}
