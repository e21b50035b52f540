import { type ChatDeploymentEntry, type ChatFeature, type ChatProviderName, chatModelsOf, type ModelCatalog, usdToMicros } from '@oc/contracts';
import { deploymentBaseUrl, deploymentKey, type Environment } from '@oc/routing';
import type { ChatProvider, GenerationEvent, GenerationRequest } from '../application/ports';
import { OpenAiCompatibleProvider } from './openai-compatible';
import { ANTHROPIC_CHAT_DEFAULT, GEMINI_CHAT_DEFAULT, OPENAI_CHAT_DEFAULT, SIMULATOR_FEATURES } from './provider-defaults';
import type { ChatTarget } from './routed-provider';

/** One deployment of chat-2, resolved: its key is in memory here and nowhere else. */
export interface ChatDeploymentConfig {
  id: string;
  provider: ChatProviderName;
  model: string;
  apiKey: string | undefined;
  baseUrl: string | undefined;
  weight: number;
  timeoutMs: number;
  maxConcurrency?: number | undefined;
  rpm?: number | undefined;
  features: ChatFeature[];
  cost: { input_per_1m_tokens: number; output_per_1m_tokens: number };
}

/** What each provider's default model accepts and costs (each adapter's file says where the figures come from). */
const PROVIDER_DEFAULTS: Record<Exclude<ChatProviderName, 'simulator'>, { model: string; cost: ChatDeploymentConfig['cost']; features: Record<ChatFeature, boolean> }> = {
  openai: OPENAI_CHAT_DEFAULT,
  anthropic: ANTHROPIC_CHAT_DEFAULT,
  gemini: GEMINI_CHAT_DEFAULT,
};

const enabled = (features: Partial<Record<ChatFeature, boolean>>) =>
  (Object.entries(features) as Array<[ChatFeature, boolean]>).filter(([, on]) => on).map(([f]) => f);

/** The simulator accepts everything and costs nothing. */
const SIMULATOR: ChatDeploymentConfig = {
  id: 'simulator',
  provider: 'simulator',
  model: 'chat-2',
  apiKey: undefined,
  baseUrl: undefined,
  weight: 1,
  timeoutMs: 60_000,
  features: enabled(SIMULATOR_FEATURES),
  cost: { input_per_1m_tokens: 0, output_per_1m_tokens: 0 },
};

interface LegacyUpstream {
  CHAT_UPSTREAM: 'simulator' | 'openai';
  CHAT_UPSTREAM_BASE_URL: string;
  CHAT_UPSTREAM_API_KEY?: string | undefined;
  CHAT_UPSTREAM_MODEL: string;
  CHAT_UPSTREAM_TIMEOUT_MS: number;
}

/**
 * chat-2's deployments: the catalog's, when it lists chat-2; otherwise the built-in order. The built-in one sends
 * everything to the first provider whose key is set, and fails over to the others in this order: the earlier
 * releases' CHAT_UPSTREAM=openai upstream (or OPENAI_API_KEY), then ANTHROPIC_API_KEY, then GEMINI_API_KEY; the
 * simulator when none is set.
 */
export function chatDeployments(catalog: ModelCatalog | undefined, legacy: LegacyUpstream, env: Environment): ChatDeploymentConfig[] {
  const listed = chatModelsOf(catalog)['chat-2']?.deployments;
  if (listed) return listed.map((entry) => fromCatalog(entry, legacy.CHAT_UPSTREAM_TIMEOUT_MS, env));
  const builtIn: ChatDeploymentConfig[] = [];
  const timeoutMs = legacy.CHAT_UPSTREAM_TIMEOUT_MS;
  if (legacy.CHAT_UPSTREAM === 'openai') {
    builtIn.push({
      id: 'openai',
      provider: 'openai',
      model: legacy.CHAT_UPSTREAM_MODEL,
      apiKey: legacy.CHAT_UPSTREAM_API_KEY,
      baseUrl: legacy.CHAT_UPSTREAM_BASE_URL,
      weight: 1,
      timeoutMs,
      // An OpenAI-compatible server: it is passed the whole Chat Completions request, as OpenAI is.
      features: enabled(OPENAI_CHAT_DEFAULT.features),
      cost: { input_per_1m_tokens: 0, output_per_1m_tokens: 0 },
    });
  }
  for (const provider of ['openai', 'anthropic', 'gemini'] as const) {
    if (builtIn.some((d) => d.id === provider)) continue;
    const apiKey = deploymentKey({ provider }, env);
    if (!apiKey) continue;
    const defaults = PROVIDER_DEFAULTS[provider];
    builtIn.push({
      id: provider,
      provider,
      model: defaults.model,
      apiKey,
      baseUrl: deploymentBaseUrl({ provider }, env),
      weight: builtIn.length === 0 ? 1 : 0,
      timeoutMs,
      features: enabled(defaults.features),
      cost: defaults.cost,
    });
  }
  return builtIn.length > 0 ? builtIn : [SIMULATOR];
}

/** The operator's own chat models of the catalog (all but chat-2), each with its price and deployments. */
export function customChatModels(
  catalog: ModelCatalog | undefined,
  legacy: LegacyUpstream,
  env: Environment,
): Record<string, { pricePer1kTokensUsd: number; deployments: ChatDeploymentConfig[] }> {
  return Object.fromEntries(
    Object.entries(chatModelsOf(catalog))
      .filter(([id]) => id !== 'chat-2')
      .map(([id, model]) => [
        id,
        { pricePer1kTokensUsd: model.price!.per_1k_tokens, deployments: model.deployments.map((entry) => fromCatalog(entry, legacy.CHAT_UPSTREAM_TIMEOUT_MS, env, id)) },
      ]),
  );
}

function fromCatalog(entry: ChatDeploymentEntry, timeoutMs: number, env: Environment, publicModel = 'chat-2'): ChatDeploymentConfig {
  const defaults = entry.provider === 'simulator' ? undefined : PROVIDER_DEFAULTS[entry.provider];
  const apiKey = deploymentKey(entry, env);
  // A local OpenAI-compatible server may need no key; every other provider does.
  if (!apiKey && entry.provider !== 'simulator' && !(entry.provider === 'openai' && entry.base_url)) {
    throw new Error(`MODELS_FILE: deployment '${entry.id}' of ${publicModel} has no key (set ${entry.api_key_env ?? entry.api_key_file ?? `the ${entry.provider} key variable`})`);
  }
  return {
    id: entry.id,
    provider: entry.provider,
    model: entry.model,
    apiKey,
    baseUrl: deploymentBaseUrl(entry, env),
    weight: entry.weight,
    timeoutMs: entry.timeout_ms ?? timeoutMs,
    maxConcurrency: entry.max_concurrency,
    rpm: entry.rpm,
    features: enabled({ ...(defaults?.features ?? SIMULATOR_FEATURES), ...entry.features }),
    cost: entry.cost ?? defaults?.cost ?? SIMULATOR.cost,
  };
}

/** The adapter of one deployment, with what the router needs to know of it. */
export function chatTarget(config: ChatDeploymentConfig, simulator: ChatProvider): ChatTarget {
  return {
    provider: chatAdapter(config, simulator),
    features: new Set(config.features),
    costMicrosPer1M: { input: usdToMicros(config.cost.input_per_1m_tokens), output: usdToMicros(config.cost.output_per_1m_tokens) },
  };
}

function chatAdapter(config: ChatDeploymentConfig, simulator: ChatProvider): ChatProvider {
  const { model, timeoutMs, baseUrl } = config;
  const apiKey = config.apiKey ?? '';
  switch (config.provider) {
    case 'simulator':
      return simulator;
    case 'openai':
      return new OpenAiCompatibleProvider({
        baseUrl: baseUrl ?? 'https://api.openai.com/v1',
        ...(config.apiKey ? { apiKey } : {}),
        model,
        timeoutMs,
        // OpenAI's own endpoint only: its current models refuse `max_tokens`.
        maxTokensField: baseUrl === undefined ? 'max_completion_tokens' : 'max_tokens',
        developerRole: baseUrl === undefined,
      });
    case 'anthropic':
      return deferred(import('./anthropic').then((m) => new m.AnthropicChatProvider({ apiKey, ...(baseUrl ? { baseUrl } : {}), model, timeoutMs })));
    case 'gemini':
      return deferred(import('./gemini').then((m) => new m.GeminiChatProvider({ apiKey, ...(baseUrl ? { baseUrl } : {}), model, timeoutMs })));
  }
}

/**
 * An adapter whose module, and the provider SDK in it, is imported only when a deployment of that provider is
 * configured: each SDK takes a tenth of a second or more to load, which every start would otherwise pay. Once
 * loaded, calls go straight to it.
 */
function deferred(loading: Promise<ChatProvider>): ChatProvider {
  let loaded: ChatProvider | undefined;
  // A module that cannot load is an installation fault, reported by the first call that needs it.
  loading.then((provider) => (loaded = provider)).catch(() => undefined);
  async function* afterLoading(request: GenerationRequest, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    yield* (await loading).generate(request, signal);
  }
  return {
    generate: (request, signal) => (loaded ?? { generate: afterLoading }).generate(request, signal),
    close: async () => (await loading.catch(() => undefined))?.close?.(),
  };
}
