import { readdirSync, readFileSync } from 'node:fs';
import { countTokens } from 'gpt-tokenizer';
import { describe, expect, it } from 'vitest';
import { gptTokenizer, OFF_THREAD_CHARS } from '../src/adapters/tokenizer';

const prose = (chars: number) => {
  const words = ['Plant', 'early,', 'water', 'often;', 'tomatoes', 'need', 'sun', '42', 'days.', '\n'];
  let text = '';
  for (let i = 0; text.length < chars; i++) text += `${words[(i * 7) % words.length]} `;
  return text;
};

/** The nice value of each thread of this process (Linux: /proc/self/task/<tid>/stat, field 19). */
const niceValues = () =>
  readdirSync('/proc/self/task').map((tid) => {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
  });

describe('token counting', () => {
  it('counts ordinary text exactly as gpt-tokenizer does, in this thread and in the worker alike', async () => {
    const small = prose(2_000);
    const large = prose(OFF_THREAD_CHARS * 4);
    expect(gptTokenizer.count(small)).toBe(countTokens(small));
    expect(await gptTokenizer.measure([small], 1_000_000)).toEqual([countTokens(small)]);
    expect(await gptTokenizer.measure([large, small], 1_000_000)).toEqual([countTokens(large), countTokens(small)]);
  });

  it('stops counting past the cap: a text over it counts as cap + 1', async () => {
    const large = prose(OFF_THREAD_CHARS * 8);
    expect(await gptTokenizer.measure([large, 'hello'], 1_000)).toEqual([1_001, countTokens('hello')]);
    expect(await gptTokenizer.measure(['hello world'], 1)).toEqual([2]);
  });

  it('counts a megabyte without a single space (quadratic for byte-pair merging) without stalling', async () => {
    // Counted whole, this takes gpt-tokenizer minutes; the test's own timeout is the bound.
    const letters = 'a'.repeat(1_000_000);
    const [count] = await gptTokenizer.measure([letters], 10_000_000);
    expect(count).toBeGreaterThan(100_000);
    expect(gptTokenizer.count(`${'!'.repeat(20_000)} ${' '.repeat(20_000)}x`)).toBeGreaterThan(0);
  });

  it.runIf(process.platform === 'linux')('counts large texts in a thread of the lowest priority, and only that thread', async () => {
    await gptTokenizer.measure([prose(OFF_THREAD_CHARS * 2)], 1_000_000);
    const nice = niceValues();
    expect(nice.filter((value) => value === 19)).toHaveLength(1);
    expect(nice[0]).toBe(0);
  });
});
