import { z } from 'zod';
import { PublicModelIdSchema } from './model-id';
import { VIDEO_SECONDS, VIDEO_SIZES } from './video';

/**
 * The model catalog (`MODELS_FILE`, YAML or JSON): which deployments serve each public model, in order.
 * Prices here are what a deployment costs us (the provider's price); what customers pay stays the spec's
 * (and CHAT_PRICE_PER_1K_TOKENS_USD / VIDEO_PRICES). Keys come from the environment or a mounted file,
 * named here, never written here. docs/providers.md documents every field.
 */
export const CHAT_PROVIDERS = ['openai', 'anthropic', 'gemini', 'simulator'] as const;
export const VIDEO_PROVIDERS = ['gemini', 'fal', 'replicate', 'openai', 'simulator'] as const;
export type ChatProviderName = (typeof CHAT_PROVIDERS)[number];
export type VideoProviderName = (typeof VIDEO_PROVIDERS)[number];

/**
 * Optional chat parameters a deployment may or may not accept; a request using one goes only where it is accepted,
 * and one no deployment of the model accepts is refused (400 `unsupported_parameter`). Most are the request field
 * of the same name; `tools` also covers `tool_choice`, `parallel_tool_calls: true` and tool calls or results in the
 * messages; `parallel_tool_calls` is `false` there (at most one call per answer); `response_format` is a
 * `json_schema` one and `json_object` the other JSON one (`text` needs nothing); `n` is more than one choice;
 * `logprobs` covers `top_logprobs`; `image_input` is an `image_url` part, and `image_url` one whose image is an https
 * URL the provider fetches (rather than a `data:` URL); `message_names` is `name` on a message.
 */
export const CHAT_FEATURES = [
  'temperature',
  'stop',
  'tools',
  'parallel_tool_calls',
  'response_format',
  'json_object',
  'image_input',
  'image_url',
  'n',
  'logprobs',
  'seed',
  'top_p',
  'frequency_penalty',
  'presence_penalty',
  'logit_bias',
  'user',
  'safety_identifier',
  'prompt_cache_key',
  'prompt_cache_retention',
  'reasoning_effort',
  'verbosity',
  'message_names',
] as const;
export type ChatFeature = (typeof CHAT_FEATURES)[number];

const DeploymentBase = {
  /** Unique among the model's deployments: recorded on every request it serves, shown in the admin API. */
  id: z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, 'lower-case letters, digits, ".", "_" and "-", at most 64'),
  /** The provider's own model id (a fal endpoint id, a Replicate `owner/name`). */
  model: z.string().min(1),
  /** The environment variable holding the key; the provider's usual one by default (OPENAI_API_KEY …). */
  api_key_env: z.string().regex(/^[A-Z_][A-Z0-9_]*$/).optional(),
  /** A mounted secret file holding the key instead (a Kubernetes secret volume); read once at start. */
  api_key_file: z.string().min(1).optional(),
  /** What the provider's SDK calls its base URL; the provider's usual variable (OPENAI_BASE_URL …) by default. */
  base_url: z.url().optional(),
  /** Share of first tries; 0 makes it a fallback used only when every weighted deployment is unavailable. */
  weight: z.number().nonnegative().default(1),
  /** Longest wait for one provider call (chat: for the answer to start, and between streamed chunks). */
  timeout_ms: z.int().positive().max(600_000).optional(),
  /** Calls in flight at once, and started per minute, per running process. */
  max_concurrency: z.int().positive().optional(),
  rpm: z.int().positive().optional(),
};

export const ChatDeploymentSchema = z.object({
  ...DeploymentBase,
  provider: z.enum(CHAT_PROVIDERS),
  /** Which optional parameters it accepts; the provider's defaults when absent (docs/providers.md). */
  features: z.partialRecord(z.enum(CHAT_FEATURES), z.boolean()).optional(),
  /** What the provider charges us, USD per million tokens. */
  cost: z.object({ input_per_1m_tokens: z.number().nonnegative(), output_per_1m_tokens: z.number().nonnegative() }).optional(),
});
export type ChatDeploymentEntry = z.infer<typeof ChatDeploymentSchema>;

export const VideoDeploymentSchema = z.object({
  ...DeploymentBase,
  provider: z.enum(VIDEO_PROVIDERS),
  /** Lengths and sizes it generates exactly; the known defaults of its model when absent. */
  seconds: z.array(z.enum(VIDEO_SECONDS)).min(1).optional(),
  sizes: z.array(z.enum(VIDEO_SIZES)).min(1).optional(),
  /** Seconds between polls of a running job. */
  poll_interval_ms: z.int().positive().optional(),
  /** Whether it takes an `input_reference` image (image-to-video); its model's known default when absent. */
  image_input: z.boolean().optional(),
  /** What the provider charges us, USD per second of video; at 1792x1024 and 1024x1792 `per_second_1080p` if set. */
  cost: z.object({ per_second: z.number().nonnegative(), per_second_1080p: z.number().nonnegative().optional() }).optional(),
});
export type VideoDeploymentEntry = z.infer<typeof VideoDeploymentSchema>;

/** The spec's public models: their kind is known and their price is the spec's (CHAT_PRICE_PER_1K_TOKENS_USD, VIDEO_PRICES). */
const SPEC_MODELS: Record<string, 'chat' | 'video'> = { 'chat-2': 'chat', 'video-2': 'video', 'video-2-pro': 'video' };


export const ChatCatalogModelSchema = z
  .object({
    type: z.literal('chat'),
    /** What customers pay, USD per 1,000 tokens (prompt and completion alike); required for a model of the operator's own. */
    price: z.object({ per_1k_tokens: z.number().positive() }).strict().optional(),
    deployments: z.array(ChatDeploymentSchema).min(1).max(32),
  })
  .strict();
export type ChatCatalogModel = z.infer<typeof ChatCatalogModelSchema>;

export const VideoCatalogModelSchema = z
  .object({
    type: z.literal('video'),
    /** What customers pay, USD per second of video, whatever the size; required for a model of the operator's own. */
    price: z.object({ per_second: z.number().positive() }).strict().optional(),
    deployments: z.array(VideoDeploymentSchema).min(1).max(32),
  })
  .strict();
export type VideoCatalogModel = z.infer<typeof VideoCatalogModelSchema>;

export const ModelCatalogSchema = z
  .object({
    models: z.preprocess(
      // The spec's models need no `type`: it is theirs already.
      (models) =>
        models && typeof models === 'object' && !Array.isArray(models)
          ? Object.fromEntries(
              Object.entries(models).map(([id, entry]) => [
                id,
                SPEC_MODELS[id] && entry && typeof entry === 'object' && !('type' in entry) ? { type: SPEC_MODELS[id], ...entry } : entry,
              ]),
            )
          : models,
      z.record(PublicModelIdSchema, z.discriminatedUnion('type', [ChatCatalogModelSchema, VideoCatalogModelSchema])),
    ),
  })
  .strict()
  .superRefine((catalog, ctx) => {
    for (const [model, entry] of Object.entries(catalog.models)) {
      const spec = SPEC_MODELS[model];
      if (spec && entry.type !== spec) ctx.addIssue({ code: 'custom', path: ['models', model, 'type'], message: `${model} is a ${spec} model` });
      if (spec && entry.price) ctx.addIssue({ code: 'custom', path: ['models', model, 'price'], message: `${model} is priced by the service's settings, not the catalog` });
      if (!spec && !entry.price) ctx.addIssue({ code: 'custom', path: ['models', model, 'price'], message: `a model of your own needs the price customers pay` });
      const seen = new Set<string>();
      for (const [i, d] of entry.deployments.entries()) {
        if (seen.has(d.id)) ctx.addIssue({ code: 'custom', path: ['models', model, 'deployments', i, 'id'], message: `deployment id '${d.id}' is used twice for ${model}` });
        seen.add(d.id);
      }
    }
  });
export type ModelCatalog = z.infer<typeof ModelCatalogSchema>;

/** The catalog's chat models (the spec's and the operator's own), by id. */
export const chatModelsOf = (catalog: ModelCatalog | undefined): Record<string, ChatCatalogModel> =>
  Object.fromEntries(Object.entries(catalog?.models ?? {}).filter((e): e is [string, ChatCatalogModel] => e[1].type === 'chat'));

/** The catalog's video models (the spec's and the operator's own), by id. */
export const videoModelsOf = (catalog: ModelCatalog | undefined): Record<string, VideoCatalogModel> =>
  Object.fromEntries(Object.entries(catalog?.models ?? {}).filter((e): e is [string, VideoCatalogModel] => e[1].type === 'video'));
