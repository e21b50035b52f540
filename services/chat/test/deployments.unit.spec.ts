import { join } from 'node:path';
import { readCatalogFile } from '@oc/routing';
import { describe, expect, it } from 'vitest';
import { chatDeployments, customChatModels } from '../src/adapters/deployments';
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
    expect(deployments.find((d) => d.id === 'anthropic')!.features).toEqual(['stop']);
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
