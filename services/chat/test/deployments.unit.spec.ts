import { join } from 'node:path';
import { DeploymentPool, readCatalogFile } from '@oc/routing';
import { describe, expect, it } from 'vitest';
import { chatDeployments, chatTarget, customChatModels } from '../src/adapters/deployments';
import { RoutedChatProvider } from '../src/adapters/routed-provider';
import type { ChatProvider, GenerationRequest } from '../src/application/ports';
import { ChatConfigSchema } from '../src/config';

const legacy = ChatConfigSchema.parse({});

describe('the built-in chat catalog', () => {
  it('is the simulator alone when no provider key is set', () => {
    expect(chatDeployments(undefined, legacy, {}).map((d) => d.id)).toEqual(['simulator']);
  });

  it('sends everything to the first provider whose key is set, in the documented order, the others standing by', () => {
    const deployments = chatDeployments(undefined, legacy, { GEMINI_API_KEY: 'g', ANTHROPIC_API_KEY: 'a', OPENAI_API_KEY: 'o' });
    expect(deployments.map((d) => [d.id, d.model, d.weight])).toEqual([
      ['openai', 'gpt-5.4-mini', 1],
      ['anthropic', 'claude-haiku-5-5', 0],
      ['gemini', 'gemini-3.1-flash-lite', 0],
    ]);
    // Anthropic's API version 2026-10-21 refuses temperature.
    expect(deployments.find((d) => d.id === 'anthropic')!.features).toEqual(['stop', 'tools', 'parallel_tool_calls', 'response_format', 'image_input', 'image_url', 'user', 'safety_identifier']);
    expect(deployments.find((d) => d.id === 'gemini')!.features).toEqual(['temperature', 'stop', 'tools', 'response_format', 'json_object', 'image_input', 'n', 'seed', 'top_p']);
  });

  it("keeps the earlier releases' CHAT_UPSTREAM=openai as the first deployment, named openai", () => {
    const config = ChatConfigSchema.parse({ CHAT_UPSTREAM: 'openai', CHAT_UPSTREAM_BASE_URL: 'http://127.0.0.1:9/v1', CHAT_UPSTREAM_MODEL: 'llama' });
    expect(chatDeployments(undefined, config, { ANTHROPIC_API_KEY: 'a' }).map((d) => [d.id, d.model, d.baseUrl])).toEqual([
      ['openai', 'llama', 'http://127.0.0.1:9/v1'],
      ['anthropic', 'claude-haiku-5-5', undefined],
    ]);
  });
});

describe('the example catalog in deploy/', () => {
  const catalog = readCatalogFile(join(import.meta.dirname, '../../../deploy/models.example.yaml'));
  const env = { OPENAI_API_KEY: 'o', GEMINI_API_KEY: 'g' };

  it("resolves the chat models of the operator's own with their prices and deployments", () => {
    const own = customChatModels(catalog, legacy, env);
    expect(Object.keys(own)).toEqual(['budget-chat']);
    expect(own['budget-chat']).toMatchObject({ pricePer1kTokensUsd: 0.02, deployments: [{ id: 'gemini-lite', provider: 'gemini', apiKey: 'g' }] });
  });

  it('refuses to start while a key file it names cannot be read, naming the file, not a key', () => {
    expect(() => chatDeployments(catalog, legacy, env)).toThrow(/anthropic deployment \(\/run\/secrets\/anthropic-api-key\) cannot be read: ENOENT/);
  });
});

describe('routing by what each provider translates', () => {
  const never: ChatProvider = { generate: () => ({ [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(new Error('not called')) }) }) };
  const routed = (env: Record<string, string>) => {
    const specs = chatDeployments(undefined, legacy, env).map((d) => ({ id: d.id, provider: d.provider, model: d.model, weight: d.weight, target: chatTarget(d, never) }));
    return new RoutedChatProvider({ model: 'chat-2', pool: new DeploymentPool(specs, { now: () => 0, random: () => 0 }), now: () => 0, onFailure: () => {} });
  };
  const request = (changes: Partial<GenerationRequest>): GenerationRequest => ({ messages: [{ role: 'user', content: 'Hi' }], maxTokens: 10, temperature: undefined, stop: [], stream: false, ...changes });
  const tools = [{ type: 'function' as const, function: { name: 'f' } }];
  const https = { role: 'user' as const, content: [{ type: 'text' as const, text: 'Look' }, { type: 'image_url' as const, image_url: { url: 'https://example.com/a.png' } }] };

  it.each<[string, Partial<GenerationRequest>, string | undefined]>([
    ['tools', { tools, toolChoice: 'required' }, undefined],
    ['parallel_tool_calls: false', { tools, parallelToolCalls: false }, undefined],
    ['a JSON schema', { responseFormat: { type: 'json_schema', json_schema: { name: 'x', schema: {} } } }, undefined],
    ['an https image', { messages: [https] }, undefined],
    ['a JSON object', { responseFormat: { type: 'json_object' } }, 'response_format'],
    ['n', { n: 2 }, 'n'],
    ['log probabilities', { logprobs: { top: 0 } }, 'logprobs'],
    ['a seed', { seed: 1 }, 'seed'],
    ['top_p', { options: { top_p: 0.5 } }, 'top_p'],
  ])('Anthropic alone: %s is refused as %s', (_, changes, refused) => {
    expect(routed({ ANTHROPIC_API_KEY: 'a' }).unsupported(request(changes))).toBe(refused);
  });

  it.each<[string, Partial<GenerationRequest>, string | undefined]>([
    ['tools', { tools, toolChoice: 'required', parallelToolCalls: true }, undefined],
    ['a JSON object', { responseFormat: { type: 'json_object' } }, undefined],
    ['n, seed and top_p', { n: 3, seed: 1, options: { top_p: 0.5 } }, undefined],
    ['parallel_tool_calls: false', { tools, parallelToolCalls: false }, 'parallel_tool_calls'],
    ['an https image', { messages: [https] }, 'messages[0].content[1]'],
    ['log probabilities', { logprobs: { top: 0 } }, 'logprobs'],
    ['a penalty', { options: { frequency_penalty: 1 } }, 'frequency_penalty'],
  ])('Gemini alone: %s is refused as %s', (_, changes, refused) => {
    expect(routed({ GEMINI_API_KEY: 'g' }).unsupported(request(changes))).toBe(refused);
  });

  it('with both, a request goes where all it uses is translated, and is refused only when no one deployment takes it all', () => {
    const both = routed({ ANTHROPIC_API_KEY: 'a', GEMINI_API_KEY: 'g' });
    expect(both.unsupported(request({ responseFormat: { type: 'json_object' } }))).toBeUndefined();
    expect(both.unsupported(request({ messages: [https], tools, parallelToolCalls: false }))).toBeUndefined();
    // JSON-object answers only on Gemini, https images only on Anthropic.
    expect(both.unsupported(request({ messages: [https], responseFormat: { type: 'json_object' } }))).toBe('response_format');
  });
});
