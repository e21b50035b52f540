import { createRequire } from 'node:module';
import { startWorker, type WorkerCalls } from '@oc/eventstore';
import type { Tokenizer } from '../application/ports';
import { countBounded } from './token-counter.mjs';

type GptTokenizer = typeof import('gpt-tokenizer');

/**
 * gpt-tokenizer builds its encoding tables (about 0.1 s of CPU) when it is loaded, so it is loaded on first
 * use, or just after start (`warmUp`), rather than while the service starts.
 */
let loaded: GptTokenizer | undefined;
const tokenizer = () => (loaded ??= createRequire(import.meta.url)('gpt-tokenizer') as GptTokenizer);

/**
 * Texts longer than this (all of one request's together) are counted in a worker thread: about 3 ms of
 * counting here at most, so one organization's huge prompts cannot stall another's requests. The worker is
 * one thread, so such counting never takes more than one core.
 */
export const OFF_THREAD_CHARS = 16_384;

let worker: WorkerCalls | undefined;

async function inWorker(texts: string[], cap: number): Promise<number[]> {
  worker ??= startWorker(new URL('./token-counter.mjs', import.meta.url), { role: 'oc-token-counter' }, 'token counter');
  try {
    return await worker.call<number[]>({ kind: 'count', texts, cap });
  } catch (error) {
    // A stopped worker fails every call: the next one starts another.
    worker = undefined;
    throw error;
  }
}

/** Counts with gpt-tokenizer's default encoding (o200k_base, pure JavaScript, no download). */
export const gptTokenizer: Tokenizer & { warmUp(): void } = {
  count: (text) => countBounded(tokenizer(), text, Infinity),
  async measure(texts, cap) {
    if (texts.reduce((chars, text) => chars + text.length, 0) > OFF_THREAD_CHARS) return inWorker(texts, cap);
    return texts.map((text) => countBounded(tokenizer(), text, cap));
  },
  warmUp: () => void setTimeout(tokenizer, 0).unref(),
};
