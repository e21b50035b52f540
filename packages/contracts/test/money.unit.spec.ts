import { describe, expect, it } from 'vitest';
import { formatUsd, microsToUsd, usdToMicros } from '../src/money';

describe('money', () => {
  it('converts USD at the edge to integer micro-dollars and back', () => {
    expect(usdToMicros(10)).toBe(10_000_000);
    expect(usdToMicros(0.1 + 0.2)).toBe(300_000);
    expect(microsToUsd(80)).toBe(0.00008);
  });

  it('refuses amounts that micro-dollars cannot hold exactly', () => {
    expect(() => usdToMicros(0.0000001)).toThrow(/decimal places/);
    expect(() => usdToMicros(Number.NaN)).toThrow(/finite/);
  });

  it('formats without hiding any micro-dollar', () => {
    expect(formatUsd(1_500_000)).toBe('$1.50');
    expect(formatUsd(80)).toBe('$0.00008');
    expect(formatUsd(0)).toBe('$0.00');
    expect(formatUsd(10_000_001)).toBe('$10.000001');
  });
});
