import {
  isSpecVideoModel,
  type ModelCatalog,
  type SpecVideoModel,
  videoModelsOf,
  usdToMicros,
  VIDEO_MODELS,
  VIDEO_REFERENCE_TYPES,
  VIDEO_SECONDS,
  VIDEO_SIZES,
  type VideoDeploymentEntry,
  type VideoModel,
  type VideoProviderName,
  type VideoReferenceType,
  type VideoSeconds,
  type VideoSize,
} from '@oc/contracts';
import { deploymentBaseUrl, deploymentKey, type Environment } from '@oc/routing';
import type { VideoProvider } from '../application/ports';
import { FAL_VIDEO_DEFAULTS, falImageTypes, falVideoCapabilities } from './fal-models';
import { GEMINI_VEO_VIDEO_DEFAULTS, geminiVeoAccepts, geminiVeoImageTypes, geminiVeoVideoCapabilities } from './gemini-veo-models';
import { OpenAiVideoProvider } from './openai-provider';
import { REPLICATE_VIDEO_DEFAULTS, replicateImageTypes, replicateVideoCapabilities } from './replicate-models';

/** One deployment of a video model, resolved: its key is in memory here and nowhere else. */
export interface VideoDeploymentConfig {
  id: string;
  provider: VideoProviderName;
  model: string;
  apiKey: string | undefined;
  baseUrl: string | undefined;
  weight: number;
  requestTimeoutMs: number;
  pollIntervalMs: number;
  maxConcurrency?: number | undefined;
  rpm?: number | undefined;
  seconds: VideoSeconds[];
  sizes: VideoSize[];
  /** The `input_reference` images it takes (image-to-video); none for text only. */
  imageTypes: readonly VideoReferenceType[];
  costPerSecondUsd: number;
  /** At the two larger sizes, when the provider charges more for its 1080p tier. */
  costPerSecond1080pUsd?: number | undefined;
}

/** What a video deployment is, once its adapter exists: the router's view of it. */
export interface VideoTarget {
  provider: VideoProvider;
  seconds: ReadonlySet<VideoSeconds>;
  sizes: ReadonlySet<VideoSize>;
  /** Whether it makes this length at this size: some models make their larger sizes only at some lengths. */
  accepts(seconds: VideoSeconds, size: VideoSize): boolean;
  imageTypes: ReadonlySet<VideoReferenceType>;
  /** What a second of video at this size costs us, integer micro-USD. */
  costMicrosPerSecond(size: VideoSize): number;
  /** How often its running jobs are polled. */
  pollIntervalMs: number;
}

type KnownProvider = 'gemini' | 'fal' | 'replicate';
interface ProviderDefaults {
  defaults: Record<SpecVideoModel, { model: string; seconds: readonly string[]; sizes: readonly string[]; cost_per_second_usd: number; cost_per_second_usd_1080p?: number }>;
  capabilities(model: string): { seconds: string[]; sizes: string[] } | undefined;
  imageTypes(model: string): readonly VideoReferenceType[];
}
const PROVIDERS: Record<KnownProvider, ProviderDefaults> = {
  gemini: { defaults: GEMINI_VEO_VIDEO_DEFAULTS, capabilities: geminiVeoVideoCapabilities, imageTypes: geminiVeoImageTypes },
  fal: { defaults: FAL_VIDEO_DEFAULTS, capabilities: falVideoCapabilities, imageTypes: falImageTypes },
  replicate: { defaults: REPLICATE_VIDEO_DEFAULTS, capabilities: replicateVideoCapabilities, imageTypes: replicateImageTypes },
};

/** What an operator's `image_input: true` stands for where we know nothing of the model: the images every provider documents. */
const COMMON_IMAGE_TYPES: readonly VideoReferenceType[] = ['image/jpeg', 'image/png'];

const ALL = { seconds: [...VIDEO_SECONDS], sizes: [...VIDEO_SIZES] };
const only = <T extends string>(values: readonly string[], allowed: readonly T[]) => allowed.filter((v) => values.includes(v));

interface LegacyUpstream {
  VIDEO_PROVIDER: 'simulator' | 'openai';
  VIDEO_UPSTREAM_BASE_URL: string;
  VIDEO_UPSTREAM_API_KEY?: string | undefined;
  VIDEO_UPSTREAM_MODELS: Partial<Record<SpecVideoModel, string>>;
  VIDEO_UPSTREAM_POLL_MS: number;
}

/** One provider call (a submission, a poll, the MP4's download). */
const REQUEST_TIMEOUT_MS = 60_000;

/** Each served model's deployments: the spec's models always, the catalog's own too. */
export type VideoModelDeployments = Record<SpecVideoModel, VideoDeploymentConfig[]> & Record<VideoModel, VideoDeploymentConfig[]>;

/** The video models served: the spec's, then the catalog's own, in its order. */
export const videoModelIds = (catalog: ModelCatalog | undefined): VideoModel[] => [
  ...VIDEO_MODELS,
  ...Object.keys(videoModelsOf(catalog)).filter((model) => !isSpecVideoModel(model)),
];

/**
 * Each video model's deployments: the catalog's, for the models it lists (the operator's own models are
 * listed there only); otherwise the built-in order, which sends everything to the first provider whose key
 * is set and fails over to the others: the earlier releases' VIDEO_PROVIDER=openai upstream, then
 * GEMINI_API_KEY (Veo), FAL_KEY, REPLICATE_API_TOKEN; the simulator when none is set.
 */
export function videoDeployments(catalog: ModelCatalog | undefined, legacy: LegacyUpstream, env: Environment): VideoModelDeployments {
  const listed = videoModelsOf(catalog);
  return Object.fromEntries(
    videoModelIds(catalog).map((model) => {
      const entries = listed[model]?.deployments;
      if (entries) return [model, entries.map((entry) => fromCatalog(model, entry, legacy, env))];
      if (!isSpecVideoModel(model)) throw new Error(`video model ${model} has no deployments`);
      return [model, builtIn(model, legacy, env)];
    }),
  ) as VideoModelDeployments;
}

function builtIn(model: SpecVideoModel, legacy: LegacyUpstream, env: Environment): VideoDeploymentConfig[] {
  const deployments: VideoDeploymentConfig[] = [];
  const weight = () => (deployments.length === 0 ? 1 : 0);
  const legacyModel = legacy.VIDEO_UPSTREAM_MODELS[model];
  if (legacy.VIDEO_PROVIDER === 'openai' && legacyModel) {
    deployments.push({
      // The earlier releases recorded `openai` as the provider of their jobs: the same id finds them again.
      id: 'openai',
      provider: 'openai',
      model: legacyModel,
      apiKey: legacy.VIDEO_UPSTREAM_API_KEY,
      baseUrl: legacy.VIDEO_UPSTREAM_BASE_URL,
      weight: weight(),
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      pollIntervalMs: legacy.VIDEO_UPSTREAM_POLL_MS,
      ...ALL,
      // An OpenAI-compatible reseller may or may not take OpenAI's input_reference: a catalog entry says so.
      imageTypes: [],
      costPerSecondUsd: 0,
    });
  }
  for (const provider of ['gemini', 'fal', 'replicate'] as const) {
    const apiKey = deploymentKey({ provider }, env);
    if (!apiKey) continue;
    const defaults = PROVIDERS[provider].defaults[model];
    deployments.push({
      id: provider,
      provider,
      model: defaults.model,
      apiKey,
      baseUrl: deploymentBaseUrl({ provider }, env),
      weight: weight(),
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      pollIntervalMs: legacy.VIDEO_UPSTREAM_POLL_MS,
      seconds: only(defaults.seconds, VIDEO_SECONDS),
      sizes: only(defaults.sizes, VIDEO_SIZES),
      imageTypes: PROVIDERS[provider].imageTypes(defaults.model),
      costPerSecondUsd: defaults.cost_per_second_usd,
      costPerSecond1080pUsd: 'cost_per_second_usd_1080p' in defaults ? defaults.cost_per_second_usd_1080p : undefined,
    });
  }
  if (deployments.length > 0) return deployments;
  return [simulator(legacy.VIDEO_UPSTREAM_POLL_MS)];
}

const simulator = (pollIntervalMs: number): VideoDeploymentConfig => ({
  // The earlier releases recorded `simulator` as the provider of simulated jobs.
  id: 'simulator',
  provider: 'simulator',
  model: 'simulator',
  apiKey: undefined,
  baseUrl: undefined,
  weight: 1,
  requestTimeoutMs: REQUEST_TIMEOUT_MS,
  pollIntervalMs,
  ...ALL,
  imageTypes: VIDEO_REFERENCE_TYPES,
  costPerSecondUsd: 0,
});

function fromCatalog(publicModel: VideoModel, entry: VideoDeploymentEntry, legacy: LegacyUpstream, env: Environment): VideoDeploymentConfig {
  const pollMs = legacy.VIDEO_UPSTREAM_POLL_MS;
  if (entry.provider === 'simulator') {
    return {
      ...simulator(entry.poll_interval_ms ?? pollMs),
      id: entry.id,
      weight: entry.weight,
      seconds: entry.seconds ?? ALL.seconds,
      sizes: entry.sizes ?? ALL.sizes,
      ...(entry.image_input === false ? { imageTypes: [] } : {}),
    };
  }
  // An OpenAI-compatible video upstream is a reseller's, not OpenAI's: its key and base URL default to VIDEO_UPSTREAM_*.
  const reseller = entry.provider === 'openai';
  const named = entry.api_key_env !== undefined || entry.api_key_file !== undefined;
  const apiKey = reseller && !named ? legacy.VIDEO_UPSTREAM_API_KEY : deploymentKey(entry, env);
  if (!apiKey) {
    const where = entry.api_key_env ?? entry.api_key_file ?? (reseller ? 'VIDEO_UPSTREAM_API_KEY' : `the ${entry.provider} key variable`);
    throw new Error(`MODELS_FILE: deployment '${entry.id}' of ${publicModel} has no key (set ${where})`);
  }
  const known = entry.provider === 'openai' ? ALL : PROVIDERS[entry.provider].capabilities(entry.model);
  const seconds = entry.seconds ?? (known ? only(known.seconds, VIDEO_SECONDS) : undefined);
  const sizes = entry.sizes ?? (known ? only(known.sizes, VIDEO_SIZES) : undefined);
  if (!seconds || !sizes) {
    throw new Error(`MODELS_FILE: deployment '${entry.id}' of ${publicModel}: ${entry.provider} model '${entry.model}' is not one we know; list its \`seconds\` and \`sizes\``);
  }
  const knownImages = entry.provider === 'openai' ? [] : PROVIDERS[entry.provider].imageTypes(entry.model);
  const imageTypes = entry.image_input === undefined ? knownImages : entry.image_input ? (knownImages.length > 0 ? knownImages : COMMON_IMAGE_TYPES) : [];
  const price: { cost_per_second_usd: number; cost_per_second_usd_1080p?: number } | undefined =
    entry.provider === 'openai' ? undefined : Object.values(PROVIDERS[entry.provider].defaults).find((d) => d.model === entry.model);
  return {
    id: entry.id,
    provider: entry.provider,
    model: entry.model,
    apiKey,
    baseUrl: reseller ? (entry.base_url ?? legacy.VIDEO_UPSTREAM_BASE_URL) : deploymentBaseUrl(entry, env),
    weight: entry.weight,
    requestTimeoutMs: entry.timeout_ms ?? REQUEST_TIMEOUT_MS,
    pollIntervalMs: entry.poll_interval_ms ?? pollMs,
    maxConcurrency: entry.max_concurrency,
    rpm: entry.rpm,
    seconds,
    sizes,
    imageTypes,
    // A price the catalog names replaces the known one whole: its 1080p rate is the same unless it names one.
    costPerSecondUsd: entry.cost ? entry.cost.per_second : (price?.cost_per_second_usd ?? 0),
    costPerSecond1080pUsd: entry.cost ? entry.cost.per_second_1080p : price?.cost_per_second_usd_1080p,
  };
}

/** 1792x1024 and 1024x1792 are made, and priced, as the providers' 1080p tier. */
const FULL_HD: ReadonlySet<VideoSize> = new Set(['1792x1024', '1024x1792']);

function costPerSecond(config: VideoDeploymentConfig): (size: VideoSize) => number {
  const base = usdToMicros(config.costPerSecondUsd);
  const fullHd = config.costPerSecond1080pUsd === undefined ? base : usdToMicros(config.costPerSecond1080pUsd);
  return (size) => (FULL_HD.has(size) ? fullHd : base);
}

/** The adapter of one deployment, with what the router needs to know of it. */
export function videoTarget(config: VideoDeploymentConfig, simulatorProvider: VideoProvider): VideoTarget {
  const seconds = new Set(config.seconds);
  const sizes = new Set(config.sizes);
  const combination = config.provider === 'gemini' ? (s: VideoSeconds, z: VideoSize) => geminiVeoAccepts(config.model, s, z) : () => true;
  return {
    provider: videoAdapter(config, simulatorProvider),
    seconds,
    sizes,
    accepts: (s, z) => seconds.has(s) && sizes.has(z) && combination(s, z),
    imageTypes: new Set(config.imageTypes),
    costMicrosPerSecond: costPerSecond(config),
    pollIntervalMs: config.pollIntervalMs,
  };
}

function videoAdapter(config: VideoDeploymentConfig, simulatorProvider: VideoProvider): VideoProvider {
  const options = {
    apiKey: config.apiKey ?? '',
    ...(config.baseUrl ? { baseUrl: config.baseUrl } : {}),
    model: config.model,
    pollIntervalMs: config.pollIntervalMs,
    requestTimeoutMs: config.requestTimeoutMs,
  };
  switch (config.provider) {
    case 'simulator':
      return simulatorProvider;
    case 'openai':
      if (!config.baseUrl) throw new Error(`video deployment '${config.id}': an OpenAI-compatible upstream needs its base URL`);
      return new OpenAiVideoProvider({ ...options, baseUrl: config.baseUrl });
    case 'gemini':
      return deferred('gemini', options.pollIntervalMs, import('./gemini-veo').then((m) => new m.GeminiVeoProvider(options)));
    case 'fal':
      return deferred('fal', options.pollIntervalMs, import('./fal').then((m) => new m.FalVideoProvider(options)));
    case 'replicate':
      return deferred('replicate', options.pollIntervalMs, import('./replicate').then((m) => new m.ReplicateVideoProvider(options)));
  }
}

/**
 * An adapter whose module, and the provider SDK in it, is imported only when a deployment of that provider is
 * configured: each SDK takes a tenth of a second or more to load, which every start would otherwise pay.
 */
function deferred(name: string, pollIntervalMs: number, loading: Promise<VideoProvider>): VideoProvider {
  // A module that cannot load is an installation fault, reported by the first call that needs it.
  loading.catch(() => undefined);
  return {
    name,
    start: async (job, now) => (await loading).start(job, now),
    // Every deferred adapter polls at its configured interval.
    nextPollAt: (_job, _started, now) => now + pollIntervalMs,
    poll: async (job, started, now) => (await loading).poll(job, started, now),
    download: async (job, started) => (await loading).download(job, started),
  };
}
