import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VIDEO_MODELS, VIDEO_SIZES } from '@oc/contracts';
import { DeploymentPool, readCatalogFile } from '@oc/routing';
import { describe, expect, it } from 'vitest';
import { type VideoDeploymentConfig, videoDeployments, videoModelIds, videoTarget } from '../src/adapters/deployments';
import { RoutedVideoProviders } from '../src/adapters/routed-providers';
import type { VideoProvider } from '../src/application/ports';
import { VideoConfigSchema } from '../src/config';
import { DEFAULT_PRICES, videoPriceMicros, videoPrices } from '../src/domain/pricing';

const legacy = VideoConfigSchema.parse({});
const simulator = { name: 'simulator' } as VideoProvider;

function routing(env: Record<string, string>) {
  const deployments = videoDeployments(undefined, legacy, env);
  const pools = Object.fromEntries(
    VIDEO_MODELS.map((model) => [
      model,
      new DeploymentPool(
        deployments[model].map((d) => ({ ...d, target: videoTarget(d, simulator) })),
        { now: () => 0, random: () => 0 },
      ),
    ]),
  );
  return { deployments, routing: new RoutedVideoProviders(pools as never, { now: () => 0, onFailure: () => {} }) };
}

describe('the built-in video catalog', () => {
  it('is the simulator alone when no provider key is set', () => {
    const { deployments } = routing({});
    expect(deployments['video-2'].map((d) => d.id)).toEqual(['simulator']);
  });

  it('sends everything to the first provider whose key is set, in the documented order, the others standing by', () => {
    const { deployments } = routing({ REPLICATE_API_TOKEN: 'r8_x', FAL_KEY: 'fal-x', GEMINI_API_KEY: 'g-x' });
    expect(deployments['video-2'].map((d) => [d.id, d.weight])).toEqual([
      ['gemini', 1],
      ['fal', 0],
      ['replicate', 0],
    ]);
    expect(deployments['video-2-pro'].map((d) => d.model)).toEqual([
      'veo-3.1-generate-preview',
      'fal-ai/bytedance/seedance/v1.5/pro/text-to-video',
      'kwaivgi/kling-v3-video',
    ]);
  });

  it("refuses, with the parameter at fault, what Veo alone cannot make: 12 seconds, and 1080p except at 8 seconds", () => {
    const { routing: veo } = routing({ GEMINI_API_KEY: 'g-x' });
    expect(veo.unsupported({ model: 'video-2', seconds: '12', size: '1280x720' })).toBe('seconds');
    expect(veo.unsupported({ model: 'video-2', seconds: '4', size: '1792x1024' })).toBe('size');
    expect(veo.unsupported({ model: 'video-2', seconds: '8', size: '1792x1024' })).toBeUndefined();
    expect(veo.unsupported({ model: 'video-2', seconds: '4', size: '720x1280' })).toBeUndefined();
  });

  it('serves a length one provider lacks through another that has it', () => {
    const { routing: both } = routing({ GEMINI_API_KEY: 'g-x', FAL_KEY: 'fal-x' });
    expect(both.unsupported({ model: 'video-2', seconds: '12', size: '1280x720' })).toBeUndefined();
  });
});

describe('image-to-video (input_reference)', () => {
  it('is declared by the known models that take an image, and refused naming input_reference where none does', () => {
    const { deployments, routing: veo } = routing({ GEMINI_API_KEY: 'g-x' });
    expect(deployments['video-2'][0]!.imageTypes).toEqual(['image/jpeg', 'image/png']);
    expect(veo.unsupported({ model: 'video-2', seconds: '8', size: '1280x720', imageType: 'image/png' })).toBeUndefined();
    expect(veo.unsupported({ model: 'video-2', seconds: '8', size: '1280x720', imageType: 'image/webp' })).toBe('input_reference');
    // The simulator takes every type it is given.
    expect(routing({}).routing.unsupported({ model: 'video-2', seconds: '4', size: '1280x720', imageType: 'image/webp' })).toBeUndefined();
    const legacyUpstream = videoDeployments(undefined, VideoConfigSchema.parse({ VIDEO_PROVIDER: 'openai', VIDEO_UPSTREAM_API_KEY: 'sk-x' }), {});
    expect(legacyUpstream['video-2'][0]!.imageTypes).toEqual([]);
  });

  it('follows the catalog: image_input false takes a capable model out, true vouches for one we know nothing of', async () => {
    const file = join(await mkdtemp(join(tmpdir(), 'oc-catalog-')), 'models.yaml');
    await writeFile(
      file,
      [
        'models:',
        '  video-2:',
        '    deployments:',
        '      - { id: veo, provider: gemini, model: veo-3.1-fast-generate-preview, image_input: false }',
        '      - { id: reseller, provider: openai, model: sora-2, base_url: "https://videos.example.com/v1", image_input: true }',
      ].join('\n'),
    );
    const deployments = videoDeployments(readCatalogFile(file), VideoConfigSchema.parse({ VIDEO_UPSTREAM_API_KEY: 'sk-x' }), { GEMINI_API_KEY: 'g-x' });
    expect(deployments['video-2'].map((d) => [d.id, d.imageTypes])).toEqual([
      ['veo', []],
      ['reseller', ['image/jpeg', 'image/png']],
    ]);
  });
});

describe('a catalog file', () => {
  const write = async (text: string) => {
    const file = join(await mkdtemp(join(tmpdir(), 'oc-catalog-')), 'models.yaml');
    await writeFile(file, text);
    return file;
  };

  it('names every problem with its place in the file', async () => {
    const file = await write('models:\n  video-2:\n    deployments:\n      - { id: "Bad Id", provider: sora, model: x }\n  video-3: {}\n');
    expect(() => readCatalogFile(file)).toThrow(/models\.video-2\.deployments\.0\.id[\s\S]*models\.video-2\.deployments\.0\.provider[\s\S]*video-3/);
  });

  it('refuses a deployment whose key is not set, naming the variable it looked for, never a value', async () => {
    const file = await write('models:\n  video-2:\n    deployments:\n      - { id: fal-main, provider: fal, model: fal-ai/bytedance/seedance/v1/pro/fast/text-to-video, api_key_env: FAL_MAIN_KEY }\n');
    expect(() => videoDeployments(readCatalogFile(file), legacy, {})).toThrow(/fal-main.*FAL_MAIN_KEY/);
  });

  it("takes a known model's lengths, sizes and price, and wants them listed for a model it does not know", async () => {
    const known = await write('models:\n  video-2:\n    deployments:\n      - { id: fast, provider: gemini, model: veo-3.1-fast-generate-preview }\n');
    const [fast] = videoDeployments(readCatalogFile(known), legacy, { GEMINI_API_KEY: 'g-x' })['video-2'];
    expect(fast).toMatchObject({ seconds: ['4', '8'], costPerSecondUsd: 0.15 });
    const unknown = await write('models:\n  video-2:\n    deployments:\n      - { id: new, provider: replicate, model: someone/new-model }\n');
    expect(() => videoDeployments(readCatalogFile(unknown), legacy, { REPLICATE_API_TOKEN: 'r8_x' })).toThrow(/list its `seconds` and `sizes`/);
  });
});

describe("a deployment's cost to us", () => {
  const write = async (yaml: string) => {
    const file = join(await mkdtemp(join(tmpdir(), 'oc-cost-')), 'models.yaml');
    await writeFile(file, yaml);
    return file;
  };
  const perSecond = (config: VideoDeploymentConfig) => {
    const target = videoTarget(config, simulator);
    return VIDEO_SIZES.map((size) => target.costMicrosPerSecond(size));
  };

  it("is the provider's 1080p rate at the two larger sizes where it charges one (fal's Seedance), one rate elsewhere", () => {
    const [fal] = videoDeployments(undefined, legacy, { FAL_KEY: 'fal-x' })['video-2'];
    // VIDEO_SIZES: 1280x720, 720x1280, 1024x1792, 1792x1024.
    expect(perSecond(fal!)).toEqual([21_600, 21_600, 48_600, 48_600]);
    const [veo] = videoDeployments(undefined, legacy, { GEMINI_API_KEY: 'g-x' })['video-2'];
    expect(perSecond(veo!)).toEqual([150_000, 150_000, 150_000, 150_000]);
  });

  it("is the catalog's price when it names one, its 1080p rate only if it names that too", async () => {
    const model = 'fal-ai/bytedance/seedance/v1/pro/fast/text-to-video';
    const one = await write(`models:\n  video-2:\n    deployments:\n      - { id: a, provider: fal, model: ${model}, cost: { per_second: 0.03 } }\n`);
    expect(perSecond(videoDeployments(readCatalogFile(one), legacy, { FAL_KEY: 'fal-x' })['video-2'][0]!)).toEqual([30_000, 30_000, 30_000, 30_000]);
    const two = await write(`models:\n  video-2:\n    deployments:\n      - { id: a, provider: fal, model: ${model}, cost: { per_second: 0.03, per_second_1080p: 0.07 } }\n`);
    expect(perSecond(videoDeployments(readCatalogFile(two), legacy, { FAL_KEY: 'fal-x' })['video-2'][0]!)).toEqual([30_000, 30_000, 70_000, 70_000]);
  });
});

describe('the example catalog in deploy/', () => {
  it('is valid, and resolves with its keys set', () => {
    const catalog = readCatalogFile(join(import.meta.dirname, '../../../deploy/models.example.yaml'));
    const env = { GEMINI_API_KEY: 'g-x', FAL_KEY: 'fal-x', REPLICATE_API_TOKEN: 'r8_x' };
    const deployments = videoDeployments(catalog, legacy, env);
    expect(deployments['video-2'].map((d) => d.id)).toEqual(['veo-fast', 'fal-seedance']);
    expect(Object.keys(catalog.models)).toEqual(expect.arrayContaining(['chat-2', 'video-2', 'video-2-pro', 'clip-fast']));
    // A model of the operator's own: served by its deployments only, at its own price.
    expect(videoModelIds(catalog)).toEqual(['video-2', 'video-2-pro', 'clip-fast']);
    expect(deployments['clip-fast']).toMatchObject([{ id: 'fal-a', provider: 'fal', seconds: ['4', '8', '12'], costPerSecondUsd: 0.0216 }]);
    expect(videoPriceMicros(videoPrices(DEFAULT_PRICES, catalog), 'clip-fast', '1792x1024', '8')).toBe(400_000);
  });
});
