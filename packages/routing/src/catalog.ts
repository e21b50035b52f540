import { readFileSync } from 'node:fs';
import { type ModelCatalog, ModelCatalogSchema } from '@oc/contracts';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';

/** Each provider's usual variables, as its own SDK and documentation name them. */
export const PROVIDER_ENV: Record<string, { key: string; baseUrl: string }> = {
  openai: { key: 'OPENAI_API_KEY', baseUrl: 'OPENAI_BASE_URL' },
  anthropic: { key: 'ANTHROPIC_API_KEY', baseUrl: 'ANTHROPIC_BASE_URL' },
  gemini: { key: 'GEMINI_API_KEY', baseUrl: 'GEMINI_BASE_URL' },
  fal: { key: 'FAL_KEY', baseUrl: 'FAL_BASE_URL' },
  replicate: { key: 'REPLICATE_API_TOKEN', baseUrl: 'REPLICATE_BASE_URL' },
};

export type Environment = Record<string, string | undefined>;

/**
 * `MODELS_FILE`: YAML (JSON is YAML too), checked against the catalog schema. Every problem is reported with
 * its path in the file, so an operator fixes them all in one go.
 */
export function readCatalogFile(path: string): ModelCatalog {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new Error(`MODELS_FILE ${path} cannot be read: ${(error as Error).message}`);
  }
  let data: unknown;
  try {
    data = parseYaml(text);
  } catch (error) {
    throw new Error(`MODELS_FILE ${path} is not valid YAML or JSON: ${(error as Error).message}`);
  }
  const parsed = ModelCatalogSchema.safeParse(data);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `  ${i.path.join('.') || '(top)'}: ${i.message}`);
    throw new Error(`MODELS_FILE ${path} is not a valid catalog:\n${problems.join('\n')}`);
  }
  return parsed.data;
}

/**
 * A deployment's key: its mounted file, else its variable, else the provider's usual variable. Undefined when
 * none is set. The key is never logged or stored; only the deployment's id is.
 */
export function deploymentKey(entry: { provider: string; api_key_env?: string | undefined; api_key_file?: string | undefined }, env: Environment): string | undefined {
  if (entry.api_key_file) {
    try {
      return readFileSync(entry.api_key_file, 'utf8').trim() || undefined;
    } catch (error) {
      throw new Error(`the key file of a ${entry.provider} deployment (${entry.api_key_file}) cannot be read: ${(error as NodeJS.ErrnoException).code ?? 'error'}`);
    }
  }
  const variable = entry.api_key_env ?? PROVIDER_ENV[entry.provider]?.key;
  return variable ? env[variable] || undefined : undefined;
}

/** A deployment's base URL: its own, else the provider's usual variable, else the SDK's default (undefined). */
export function deploymentBaseUrl(entry: { provider: string; base_url?: string | undefined }, env: Environment): string | undefined {
  const variable = PROVIDER_ENV[entry.provider]?.baseUrl;
  return entry.base_url ?? (variable ? env[variable] || undefined : undefined);
}

/** The providers' usual variables, validated at boot with the rest of a service's settings. */
export const ProviderEnvSchema = z.object({
  OPENAI_API_KEY: z.string().min(1).optional(),
  OPENAI_BASE_URL: z.url().optional(),
  ANTHROPIC_API_KEY: z.string().min(1).optional(),
  ANTHROPIC_BASE_URL: z.url().optional(),
  GEMINI_API_KEY: z.string().min(1).optional(),
  GEMINI_BASE_URL: z.url().optional(),
  FAL_KEY: z.string().min(1).optional(),
  FAL_BASE_URL: z.url().optional(),
  REPLICATE_API_TOKEN: z.string().min(1).optional(),
  REPLICATE_BASE_URL: z.url().optional(),
});

/**
 * Where deployments find their keys: the validated settings for the providers' usual variables (only there: a
 * service started with settings of its own never picks a key up from its process), and the process environment
 * for any other variable a catalog names.
 */
export function providerEnvironment(settings: object, processEnv: Environment = process.env): Environment {
  const env: Environment = { ...processEnv };
  for (const { key, baseUrl } of Object.values(PROVIDER_ENV)) {
    for (const name of [key, baseUrl]) {
      const value = (settings as Record<string, unknown>)[name];
      env[name] = typeof value === 'string' ? value : undefined;
    }
  }
  return env;
}
