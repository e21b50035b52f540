import { describe, expect, it } from 'vitest';
import { perDay, videoCost } from '../src/format';

describe('perDay', () => {
  it('never shows a count that is not 0 as 0 a day', () => {
    expect(perDay(0, 7)).toBe('0');
    expect(perDay(1, 7)).toBe('0.1');
    expect(perDay(3, 7)).toBe('0.4');
    expect(perDay(1, 30)).toBe('<0.1');
  });

  it('keeps one decimal under 10 a day and whole numbers above', () => {
    expect(perDay(7, 7)).toBe('1');
    expect(perDay(48, 7)).toBe('6.9');
    expect(perDay(69, 7)).toBe('9.9');
    expect(perDay(70, 7)).toBe('10');
    expect(perDay(84_000, 7)).toBe('12,000');
  });
});

describe('videoCost', () => {
  const video = (billing: 'reserved' | 'charged' | 'released' | 'test') => ({ 'x-billing': billing, 'x-cost': { amount: 0.4 } });

  it('shows the price only of what is charged or held, and why nothing is charged otherwise', () => {
    expect(videoCost(video('charged'))).toBe('$0.40');
    expect(videoCost(video('reserved'))).toBe('$0.40 reserved');
    expect(videoCost(video('test'))).toBe('Not charged (test key)');
    expect(videoCost(video('released'))).toBe('Not charged (failed)');
  });
});
