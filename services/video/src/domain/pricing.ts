import { type ModelCatalog, VIDEO_MODELS, VIDEO_SIZES, type VideoModel, type VideoSeconds, type VideoSize, videoModelsOf } from '@oc/contracts';
import { z } from 'zod';

/** USD per second of video, per model and size: the spec's models (VIDEO_PRICES). */
export const PriceTableSchema = z.record(z.enum(VIDEO_MODELS), z.record(z.enum(VIDEO_SIZES), z.number().nonnegative()));
export type PriceTable = z.infer<typeof PriceTableSchema>;
/** USD per second of video, per size, of every model served: the spec's, and the catalog's own. */
export type VideoPrices = Readonly<Record<VideoModel, Record<VideoSize, number>>>;

const same = (usd: number) => Object.fromEntries(VIDEO_SIZES.map((size) => [size, usd])) as Record<VideoSize, number>;

/** The defaults: video-2 0.10 USD/s; video-2-pro 0.30 USD/s in 720p, 0.50 USD/s in the tall and wide large sizes. */
export const DEFAULT_PRICES: PriceTable = {
  'video-2': same(0.1),
  'video-2-pro': { '1280x720': 0.3, '720x1280': 0.3, '1024x1792': 0.5, '1792x1024': 0.5 },
};

/** The spec's prices, and each model of the operator's own at its catalog `price.per_second`, whatever the size. */
export function videoPrices(table: PriceTable, catalog: ModelCatalog | undefined): VideoPrices {
  const own = Object.entries(videoModelsOf(catalog)).flatMap(([model, entry]) => (entry.price ? [[model, same(entry.price.per_second)] as const] : []));
  return { ...Object.fromEntries(own), ...table };
}

/** Price of one video in micro-USD; integer arithmetic so 3 × 0.1 is exactly 0.3. */
export function videoPriceMicros(table: VideoPrices, model: VideoModel, size: VideoSize, seconds: VideoSeconds): number {
  const perSecond = table[model]?.[size];
  if (perSecond === undefined) throw new Error(`No price for ${model} at ${size}`);
  return Math.round(perSecond * 1_000_000) * Number(seconds);
}
