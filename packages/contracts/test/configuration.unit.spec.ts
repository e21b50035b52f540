import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { configFromEnv } from '../src/configuration';

const schema = z.object({ PORT: z.coerce.number().int().max(65_535), ADMIN_TOKEN: z.string().min(16) });

describe('configFromEnv', () => {
  afterEach(() => vi.restoreAllMocks());

  it('returns the parsed environment', () => {
    expect(configFromEnv(schema, { PORT: '8080', ADMIN_TOKEN: 'a'.repeat(16) })).toEqual({ PORT: 8080, ADMIN_TOKEN: 'a'.repeat(16) });
  });

  it('ends the process with one line naming every variable at fault, and no stack', () => {
    const written: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => (written.push(String(chunk)), true));
    vi.spyOn(process, 'exit').mockImplementation((code) => {
      throw new Error(`exit ${code}`);
    });

    expect(() => configFromEnv(schema, { PORT: '99999' })).toThrow('exit 78');
    expect(written).toHaveLength(1);
    expect(written[0]).toMatch(/^Invalid configuration: PORT: .+; ADMIN_TOKEN: .+\n$/);
    expect(written[0]).not.toMatch(/ at /);
  });
});
