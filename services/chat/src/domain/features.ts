import type { ChatFeature } from '@oc/contracts';
import { PASS_THROUGH_OPTIONS, type GenerationRequest } from '../application/ports';

/** An optional feature a request uses, and the parameter a refusal names. */
export interface FeatureUse {
  feature: ChatFeature;
  param: string;
}

/**
 * What a request needs of a deployment beyond plain text chat, each feature once, with the first parameter that
 * uses it. Tool calls or results in the history need `tools` as much as `tools` itself does: a provider without
 * them cannot read such a conversation.
 */
export function featuresUsed(request: GenerationRequest): FeatureUse[] {
  const used = new Map<ChatFeature, string>();
  const use = (feature: ChatFeature, param: string) => {
    if (!used.has(feature)) used.set(feature, param);
  };
  if (request.temperature !== undefined) use('temperature', 'temperature');
  if (request.stop.length > 0) use('stop', 'stop');
  if (request.tools !== undefined && request.tools.length > 0) use('tools', 'tools');
  if (request.toolChoice !== undefined) use('tools', 'tool_choice');
  if (request.parallelToolCalls !== undefined) use('tools', 'parallel_tool_calls');
  // At most one call per answer is a constraint some providers cannot impose (Gemini); `true` is every provider's way.
  if (request.parallelToolCalls === false) use('parallel_tool_calls', 'parallel_tool_calls');
  if (request.responseFormat?.type === 'json_schema') use('response_format', 'response_format');
  if (request.responseFormat?.type === 'json_object') use('json_object', 'response_format');
  if ((request.n ?? 1) > 1) use('n', 'n');
  if (request.logprobs !== undefined) use('logprobs', 'logprobs');
  if (request.seed !== undefined) use('seed', 'seed');
  for (const option of PASS_THROUGH_OPTIONS) if (request.options?.[option] !== undefined) use(option, option);
  for (const [i, message] of request.messages.entries()) {
    if (message.role === 'tool') use('tools', `messages[${i}]`);
    if (message.role === 'assistant' && message.tool_calls !== undefined) use('tools', `messages[${i}].tool_calls`);
    if (message.role !== 'tool' && message.name !== undefined) use('message_names', `messages[${i}].name`);
    if (message.role === 'user' && Array.isArray(message.content)) {
      const image = message.content.findIndex((part) => part.type === 'image_url');
      if (image >= 0) use('image_input', `messages[${i}].content[${image}]`);
      // An image the provider must fetch itself, which not every provider does.
      const fetched = message.content.findIndex((part) => part.type === 'image_url' && part.image_url.url.startsWith('https:'));
      if (fetched >= 0) use('image_url', `messages[${i}].content[${fetched}]`);
    }
  }
  return [...used].map(([feature, param]) => ({ feature, param }));
}
