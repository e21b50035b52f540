import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseOrThrow } from '../src/validation';

const Body = z.strictObject({
  model: z.enum(['chat-2']),
  messages: z.array(z.object({ role: z.enum(['user', 'system']), content: z.string() })).min(1),
  seconds: z.enum(['4', '8', '12']).optional(),
});

const errorOf = (input: unknown, codes = {}) => {
  try {
    parseOrThrow(Body, input, codes);
  } catch (e) {
    return (e as { toBody(): unknown }).toBody();
  }
  throw new Error('expected a validation error');
};

describe('parseOrThrow', () => {
  it('names a missing parameter with missing_parameter', () => {
    expect(errorOf({ messages: [{ role: 'user', content: 'x' }] })).toMatchObject({
      error: { type: 'invalid_request_error', code: 'missing_parameter', param: 'model' },
    });
  });

  it('lets a parameter carry its own code for both missing and invalid values', () => {
    const codes = { model: { invalid: 'invalid_model', missing: 'invalid_model' }, seconds: 'invalid_seconds' };
    expect(errorOf({ messages: [{ role: 'user', content: 'x' }] }, codes)).toMatchObject({
      error: { code: 'invalid_model', param: 'model' },
    });
    expect(errorOf({ model: 'chat-2', messages: [{ role: 'user', content: 'x' }], seconds: '5' }, codes)).toMatchObject({
      error: { code: 'invalid_seconds', param: 'seconds' },
    });
  });

  it('points into nested parameters the way OpenAI does', () => {
    expect(errorOf({ model: 'chat-2', messages: [{ role: 'robot', content: 'x' }] })).toMatchObject({
      error: { code: 'invalid_parameter', param: 'messages[0].role' },
    });
  });

  it('rejects unknown parameters of a strict body', () => {
    expect(errorOf({ model: 'chat-2', messages: [{ role: 'user', content: 'x' }], colour: 'red' })).toMatchObject({
      error: { code: 'unknown_parameter', param: 'colour' },
    });
  });

  it('returns the parsed value when valid', () => {
    expect(parseOrThrow(Body, { model: 'chat-2', messages: [{ role: 'user', content: 'hi' }] }).model).toBe('chat-2');
  });
});
