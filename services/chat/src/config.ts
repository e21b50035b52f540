import { hostname } from 'node:os';
import { usdToMicros } from '@oc/contracts';
import { ProviderEnvSchema, providerEnvironment, readCatalogFile } from '@oc/routing';
import { z } from 'zod';
import { type ChatDeploymentConfig, chatDeployments, customChatModels } from './adapters/deployments';
import type { ChatPricing, CompletionLifecycle } from './application/chat';

/**
 * The chat service's settings, shared by its own process and the standalone one. Defaults: the
 * simulator upstream, the spec's 0.08 USD per 1,000 tokens and 128K-token context.
 */
export const ChatConfigSchema = ProviderEnvSchema.pick({
  OPENAI_API_KEY: true,
  OPENAI_BASE_URL: true,
  ANTHROPIC_API_KEY: true,
  ANTHROPIC_BASE_URL: true,
  GEMINI_API_KEY: true,
  GEMINI_BASE_URL: true,
}).extend({
  /** The model catalog (YAML or JSON); without it, every provider whose key is set serves chat-2 (docs/providers.md). */
  MODELS_FILE: z.string().min(1).optional(),
  /** The one OpenAI-compatible upstream of earlier releases: kept, as one deployment named `openai`. */
  CHAT_UPSTREAM: z.enum(['simulator', 'openai']).default('simulator'),
  CHAT_UPSTREAM_BASE_URL: z.string().url().default('https://api.openai.com/v1'),
  CHAT_UPSTREAM_API_KEY: z.string().optional(),
  CHAT_UPSTREAM_MODEL: z.string().min(1).default('gpt-4o-mini'),
  CHAT_UPSTREAM_TIMEOUT_MS: z.coerce.number().int().positive().default(60_000),
  CHAT_PRICE_PER_1K_TOKENS_USD: z.coerce.number().nonnegative().default(0.08),
  CHAT_DEFAULT_MAX_TOKENS: z.coerce.number().int().positive().default(4_096),
  CHAT_CONTEXT_TOKENS: z.coerce.number().int().positive().default(128_000),
  CHAT_SIMULATOR_WORD_DELAY_MS: z.coerce.number().int().nonnegative().default(30),
  CHAT_COMPLETION_DEADLINE_MS: z.coerce.number().int().positive().default(10 * 60_000),
  /**
   * Must differ between running replicas; the host name by default (in the chat process: REPLICA_ID, then the
   * host name). Kept across restarts (a StatefulSet's pod name), a restarted replica settles what it left open.
   */
  CHAT_REPLICA_ID: z.string().min(1).optional(),
});
export type ChatConfig = z.infer<typeof ChatConfigSchema>;

/** chat-2's deployments and the operator's own chat models, from MODELS_FILE or the built-in order. */
function catalogSettings(config: ChatConfig) {
  const catalog = config.MODELS_FILE ? readCatalogFile(config.MODELS_FILE) : undefined;
  const env = providerEnvironment(config);
  return { deployments: chatDeployments(catalog, config, env), models: customChatModels(catalog, config, env) };
}

/**
 * The settings the chat service runs on. The providers' keys (OPENAI_API_KEY …, or the variables a catalog names)
 * are read here and kept only in the adapters' memory.
 */
export function chatSettings(config: ChatConfig): {
  deployments: ChatDeploymentConfig[];
  models: ReturnType<typeof customChatModels>;
  pricing: ChatPricing;
  lifecycle: CompletionLifecycle;
  simulatorWordDelayMs: number;
} {
  return {
    ...catalogSettings(config),
    pricing: {
      microsPer1kTokens: usdToMicros(config.CHAT_PRICE_PER_1K_TOKENS_USD),
      defaultMaxTokens: config.CHAT_DEFAULT_MAX_TOKENS,
      contextTokens: config.CHAT_CONTEXT_TOKENS,
    },
    lifecycle: { replica: config.CHAT_REPLICA_ID ?? hostname(), deadlineMs: config.CHAT_COMPLETION_DEADLINE_MS },
    simulatorWordDelayMs: config.CHAT_SIMULATOR_WORD_DELAY_MS,
  };
}
