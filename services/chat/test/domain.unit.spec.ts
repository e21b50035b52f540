import { type ChatMessage, contentText, DomainError, toApiError } from '@oc/contracts';
import { describe, expect, it } from 'vitest';
import { conversationTokens, trimToContext } from '../src/domain/context';
import { chargeMicros, costMicros } from '../src/domain/pricing';
import { theoryInstruction, theoryWeights } from '../src/domain/theory';

const weightsOf = (x: number, y: number) => Object.fromEntries(theoryWeights({ x, y }).map((w) => [w.corner, w.weight]));

describe('theory position', () => {
  it.each([
    [-1, -1, 'voluntarism'],
    [1, -1, 'structuralism'],
    [-1, 1, 'subjectivism'],
    [1, 1, 'theurgism'],
  ])('puts all the weight on the corner at (%d, %d): %s', (x, y, corner) => {
    expect(weightsOf(x, y)[corner]).toBe(1);
    expect(Object.values(weightsOf(x, y)).reduce((a, b) => a + b)).toBe(1);
  });

  it('blends evenly at the origin and bilinearly in between', () => {
    expect(weightsOf(0, 0)).toEqual({ voluntarism: 0.25, structuralism: 0.25, subjectivism: 0.25, theurgism: 0.25 });
    expect(weightsOf(0.5, -0.5)).toEqual({ voluntarism: 0.1875, structuralism: 0.5625, subjectivism: 0.0625, theurgism: 0.1875 });
  });

  it('states the blend as an instruction, heaviest emphasis first', () => {
    expect(theoryInstruction({ x: 0.5, y: -0.5 })).toBe(
      'Steer the emphasis of your reply by this blend of theories of change: structuralism (policy and systems change) 56%, ' +
        'voluntarism (grassroots mobilization) 19%, theurgism (faith-based activism) 19%, subjectivism (cultural transformation) 6%.',
    );
    expect(theoryInstruction({ x: 1, y: 1 })).toBe(
      'Steer the emphasis of your reply by this blend of theories of change: theurgism (faith-based activism) 100%.',
    );
  });
});

describe('context trimming', () => {
  // One token per character of content; each message adds 4 of framing and the reply's priming 3.
  const m = (role: 'system' | 'user' | 'assistant', content: string): ChatMessage => ({ role, content });
  const counts = (messages: ChatMessage[]) => messages.map((x) => contentText(x.content).length);

  it('keeps a conversation that fits', () => {
    const messages = [m('system', 'sys'), m('user', 'hello')];
    expect(conversationTokens(counts(messages))).toBe(19);
    expect(trimToContext(messages, counts(messages), 20)).toEqual({ messages, tokens: 19 });
  });

  it('drops the oldest non-system messages first, keeping system messages and the newest one', () => {
    const messages = [m('system', 'sys'), m('user', 'aaaaaaaaa'), m('assistant', 'bbbbbbbbb'), m('system', 'more'), m('user', 'ccc')];
    const kept = [m('system', 'sys'), m('assistant', 'bbbbbbbbb'), m('system', 'more'), m('user', 'ccc')];
    expect(trimToContext(messages, counts(messages), 40)).toEqual({ messages: kept, tokens: conversationTokens(counts(kept)) });
    const fewer = [m('system', 'sys'), m('system', 'more'), m('user', 'ccc')];
    expect(trimToContext(messages, counts(messages), 30)).toEqual({ messages: fewer, tokens: conversationTokens(counts(fewer)) });
  });

  it('refuses with 400 context_length_exceeded when even the newest message does not fit', () => {
    try {
      trimToContext([m('system', 'sys'), m('user', 'x'.repeat(50))], [3, 50], 20);
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(DomainError);
      expect(toApiError(error).toBody().error).toMatchObject({ code: 'context_length_exceeded', param: 'messages' });
    }
  });
});

describe('token pricing', () => {
  it('charges 80 micro-USD per token at the default 0.08 USD per 1,000 tokens, exactly', () => {
    expect(costMicros(1, 80_000)).toBe(80);
    expect(costMicros(1_234, 80_000)).toBe(98_720);
  });

  it('rounds a fractional price up once per request', () => {
    expect(costMicros(3, 333)).toBe(1);
    expect(costMicros(1_001, 1_000)).toBe(1_001);
    expect(costMicros(1, 1)).toBe(1);
  });

  it('never charges more than was reserved', () => {
    const usage = { prompt_tokens: 100, completion_tokens: 50, total_tokens: 150 };
    expect(chargeMicros(usage, 80_000, 20_000)).toBe(12_000);
    expect(chargeMicros(usage, 80_000, 10_000)).toBe(10_000);
  });
});
