import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { configFromEnv, parseConfiguration, type ConfigurationCheck } from '../src/configuration';

const schema = z.object({
  PORT: z.coerce.number().int().max(65_535).default(8080).describe('a TCP port, 0 to 65535'),
  ADMIN_TOKEN: z.string().min(16).describe('at least 16 characters'),
  DELAYS: z
    .string()
    .default('0')
    .transform((csv) => csv.split(',').map(Number))
    .pipe(z.array(z.int())),
  MODE: z.enum(['production', 'development']).optional(),
  KEY: z.string().refine((v) => v.length === 4, 'must be 4 characters').optional(),
});
const keyInProduction: ConfigurationCheck = (env) =>
  (env.MODE ?? 'production') === 'production' && !env.KEY ? [{ variable: 'KEY', message: 'required in production mode' }] : [];

describe('configuration', () => {
  afterEach(() => vi.restoreAllMocks());

  it('returns the parsed environment', () => {
    expect(configFromEnv(schema, { PORT: '80', ADMIN_TOKEN: 'a'.repeat(16), MODE: 'development' }, [keyInProduction])).toEqual({
      PORT: 80,
      ADMIN_TOKEN: 'a'.repeat(16),
      DELAYS: [0],
      MODE: 'development',
    });
  });

  it('names each variable at fault with what it expects, missing ones as required', () => {
    const parsed = parseConfiguration(schema, { PORT: '99999', DELAYS: '1,x', KEY: 'abc' }, [keyInProduction]);
    expect(parsed).toEqual({
      success: false,
      problems: [
        { variable: 'PORT', message: 'Too big: expected number to be <=65535 (a TCP port, 0 to 65535)' },
        { variable: 'ADMIN_TOKEN', message: 'required (at least 16 characters)' },
        { variable: 'DELAYS', message: 'expected number, received NaN in entry 2' },
        { variable: 'KEY', message: 'must be 4 characters' },
      ],
    });
  });

  it('applies the rules across variables even when the schema fails, once per variable', () => {
    expect(parseConfiguration(schema, { PORT: 'x', ADMIN_TOKEN: 'a'.repeat(16) }, [keyInProduction])).toMatchObject({
      success: false,
      problems: [{ variable: 'PORT' }, { variable: 'KEY', message: 'required in production mode' }],
    });
    expect(parseConfiguration(schema, { ADMIN_TOKEN: 'a'.repeat(16) }, [keyInProduction])).toEqual({
      success: false,
      problems: [{ variable: 'KEY', message: 'required in production mode' }],
    });
  });

  it('ends the process with one line per problem, exit code 78 and no stack', () => {
    const written: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => (written.push(String(chunk)), true));
    vi.spyOn(process, 'exit').mockImplementation((code) => {
      throw new Error(`exit ${code}`);
    });

    expect(() => configFromEnv(schema, { PORT: '99999', ADMIN_TOKEN: 'secret-value' })).toThrow('exit 78');
    const lines = written.join('').split('\n').filter(Boolean);
    expect(lines).toEqual([
      'Invalid configuration: PORT: Too big: expected number to be <=65535 (a TCP port, 0 to 65535)',
      'Invalid configuration: ADMIN_TOKEN: Too small: expected string to have >=16 characters (at least 16 characters)',
    ]);
    // Values are never printed: a malformed one may be a secret.
    expect(written.join('')).not.toContain('secret-value');
  });
});
