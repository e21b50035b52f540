import { z } from 'zod';
import type { ModelCatalog } from './catalog';
import { CHAT_MODELS } from './chat';
import { VIDEO_MODELS } from './video';

/** `GET /v1/models/{model}`: OpenAI's model object, so its SDKs' `models.retrieve` reads it unchanged. */
export const ModelSchema = z.object({
  id: z.string(),
  object: z.literal('model'),
  /** Unix seconds: when the model was published here, fixed so that clients can cache and compare it. */
  created: z.int(),
  owned_by: z.string(),
});
export type Model = z.infer<typeof ModelSchema>;

/** `GET /v1/models`: OpenAI's list, without pagination (its SDKs read `data` and stop). */
export const ModelListSchema = z.object({ object: z.literal('list'), data: z.array(ModelSchema) });

type ModelId = (typeof CHAT_MODELS)[number] | (typeof VIDEO_MODELS)[number];

/**
 * Every model the API serves, with a publication date that never moves (a `created` of "now" would change
 * on every call). A model added to `CHAT_MODELS` or `VIDEO_MODELS` must be given its date here.
 */
const PUBLISHED: Record<ModelId, number> = {
  'chat-2': 1_767_225_600, // 2026-01-01T00:00:00Z
  'video-2': 1_767_225_600,
  'video-2-pro': 1_767_225_600,
};

export const MODELS: readonly Model[] = [...CHAT_MODELS, ...VIDEO_MODELS].map((id) => ({
  id,
  object: 'model' as const,
  created: PUBLISHED[id],
  owned_by: 'oc',
}));

/**
 * The models a deployment serves: the spec's, then the operator's own from its catalog. An operator's model is
 * dated like the spec's: its publication here is the catalog's, which has no date of its own.
 */
export function modelsServed(catalog: ModelCatalog | undefined): readonly Model[] {
  const own = Object.keys(catalog?.models ?? {}).filter((id) => !MODELS.some((m) => m.id === id));
  return [...MODELS, ...own.map((id) => ({ id, object: 'model' as const, created: 1_767_225_600, owned_by: 'oc' }))];
}
