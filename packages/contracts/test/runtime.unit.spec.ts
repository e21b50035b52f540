import { describe, expect, it } from 'vitest';
import { randomId, sortableIds, uuidV7 } from '../src/runtime';

describe('random ids', () => {
  it('are 24 base62 characters, prefixed as asked, and do not repeat', () => {
    const ids = Array.from({ length: 20_000 }, () => sortableIds.next('video_'));
    for (const id of ids) expect(id).toMatch(/^video_[0-9A-Za-z]{24}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('sort as they were made, millisecond by millisecond', () => {
    const times = [Date.UTC(2026, 0, 1), Date.UTC(2026, 0, 1) + 1, Date.UTC(2026, 0, 1) + 62, Date.UTC(2027, 5, 3), Date.UTC(2080, 11, 31)];
    const real = Date.now;
    try {
      const ids = times.map((t) => {
        Date.now = () => t;
        return sortableIds.next('chat_');
      });
      expect([...ids].sort()).toEqual(ids);
      expect(new Set(ids.map((id) => id.slice(5, 12))).size).toBe(times.length);
    } finally {
      Date.now = real;
    }
  });

  it('make version 7 UUIDs that sort by their time', () => {
    const ids = [1, 2, 1_000, Date.UTC(2026, 0, 1)].map((t) => uuidV7(t));
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect([...ids].sort()).toEqual(ids);
    expect(uuidV7(Date.UTC(2026, 0, 1)).slice(0, 13)).toBe('019b76da-a800');
  });

  it('use every character about equally often', () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 10_000; i++) for (const c of randomId()) counts.set(c, (counts.get(c) ?? 0) + 1);
    // 240,000 characters over 62: about 3,871 each; a biased mapping (bytes modulo 62) would skew the first eight.
    expect(counts.size).toBe(62);
    for (const n of counts.values()) expect(Math.abs(n - 240_000 / 62)).toBeLessThan(400);
  });
});
