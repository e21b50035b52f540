import { describe, expect, it } from 'vitest';
import { randomId, randomIds } from '../src/runtime';

describe('random ids', () => {
  it('are 24 base62 characters, prefixed as asked, and do not repeat', () => {
    const ids = Array.from({ length: 20_000 }, () => randomIds.next('video_'));
    for (const id of ids) expect(id).toMatch(/^video_[0-9A-Za-z]{24}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('use every character about equally often', () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 10_000; i++) for (const c of randomId()) counts.set(c, (counts.get(c) ?? 0) + 1);
    // 240,000 characters over 62: about 3,871 each; a biased mapping (bytes modulo 62) would skew the first eight.
    expect(counts.size).toBe(62);
    for (const n of counts.values()) expect(Math.abs(n - 240_000 / 62)).toBeLessThan(400);
  });
});
