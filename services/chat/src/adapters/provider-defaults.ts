/**
 * What each provider's default chat model is, accepts and costs us: data only, so that choosing deployments does
 * not load a provider's SDK (each adapter is imported when a deployment of its provider is configured).
 */
import type { ChatFeature } from '@oc/contracts';

/** Every optional feature: OpenAI's Chat Completions has each one, and the OpenAI-compatible adapter passes each through. */
const ALL: Record<ChatFeature, true> = {
  temperature: true,
  stop: true,
  tools: true,
  parallel_tool_calls: true,
  response_format: true,
  json_object: true,
  image_input: true,
  image_url: true,
  n: true,
  logprobs: true,
  seed: true,
  top_p: true,
  frequency_penalty: true,
  presence_penalty: true,
  logit_bias: true,
  user: true,
  safety_identifier: true,
  prompt_cache_key: true,
  prompt_cache_retention: true,
  reasoning_effort: true,
  verbosity: true,
  message_names: true,
};

/** Nothing beyond plain text chat; each provider below turns on what its adapter translates. */
const NONE: Record<ChatFeature, false> = Object.fromEntries(Object.keys(ALL).map((f) => [f, false])) as Record<ChatFeature, false>;

/**
 * OpenAI's own endpoint: its current models take `max_completion_tokens`, `temperature` and the rest of the
 * Chat Completions request (docs/providers.md). An OpenAI-compatible server is assumed to take all of it too; a
 * catalog entry turns off what a given server lacks.
 */
export const OPENAI_CHAT_DEFAULT = {
  model: 'gpt-5.4-mini',
  /** USD per 1M tokens (developers.openai.com/api/docs/pricing, read 2026-11-27 through its mirrors). */
  cost: { input_per_1m_tokens: 0.75, output_per_1m_tokens: 4.5 },
  features: ALL,
} as const;

/**
 * Anthropic's: API version 2026-10-21, which its SDK sends, refuses `temperature` and `top_p`. What the adapter
 * translates (anthropic-messages.ts): tools with tool_choice and `parallel_tool_calls: false`, `json_schema` answers
 * (structured outputs, GA as `output_config.format`), images as data or https URLs, and `safety_identifier` / `user`
 * as `metadata.user_id`. The Messages API has no `n`, log probabilities, seed, penalties or JSON-object mode.
 */
export const ANTHROPIC_CHAT_DEFAULT = {
  /** Claude Haiku 5.5, released 2026-10-07, Anthropic's fastest: https://platform.claude.com/docs/en/models/haiku-5-5/overview */
  model: 'claude-haiku-5-5',
  /**
   * USD per 1M tokens, from Anthropic's pricing (https://platform.claude.com/docs/en/about-claude/pricing, figures
   * as listed on the model overview above), for prompts up to 100,000 tokens. A longer prompt bills 5x both ways
   * ($0.50 / $2.50), which this shape cannot say.
   */
  cost: { input_per_1m_tokens: 0.1, output_per_1m_tokens: 0.5 },
  features: {
    ...NONE,
    stop: true,
    tools: true,
    parallel_tool_calls: true,
    response_format: true,
    image_input: true,
    image_url: true,
    user: true,
    safety_identifier: true,
  },
} as const;

/**
 * `gemini-3.1-flash-lite`: generally available since 2026-05-07, the cheapest current GA Flash-Lite. The newer
 * `gemini-3.5-flash-lite` costs more ($0.30 / $2.50) and ignores a custom temperature
 * (docs.cloud.google.com/gemini-enterprise-agent-platform/models/gemini/3-5-flash-lite), so `temperature` would not
 * be a feature there.
 */
export const GEMINI_CHAT_DEFAULT = {
  model: 'gemini-3.1-flash-lite',
  /**
   * USD per 1M tokens, Standard paid tier, text input; output includes thinking tokens
   * (https://ai.google.dev/gemini-api/docs/pricing, as quoted by several third parties: the page itself could not
   * be read from here).
   */
  cost: { input_per_1m_tokens: 0.25, output_per_1m_tokens: 1.5 },
  /**
   * What the adapter translates (gemini-content.ts): function tools and tool_choice, both JSON answers, images given
   * as data URLs, `n` as `candidateCount` (1 to 8 on this model: docs.cloud.google.com/gemini-enterprise-agent-platform/
   * models/gemini/3-1-flash-lite), `seed` and `top_p`. Not: `parallel_tool_calls: false` (Gemini has no such switch),
   * https images (Gemini fetches a URL only with its MIME type, which an OpenAI image part does not give), log
   * probabilities (not confirmed for Gemini 3 models), and the penalties (Gemini 3 answers "Penalty is not enabled").
   */
  features: { ...NONE, temperature: true, stop: true, tools: true, response_format: true, json_object: true, image_input: true, n: true, seed: true, top_p: true },
} as const;

/** The simulator emulates every feature, so that every client test runs offline. */
export const SIMULATOR_FEATURES = ALL;
