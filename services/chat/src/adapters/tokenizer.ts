import { createRequire } from 'node:module';
import { startWorker, type WorkerCalls } from '@oc/eventstore';
import type { Tokenizer } from '../application/ports';
import { countBounded } from './token-counter.mjs';

type GptTokenizer = typeof import('gpt-tokenizer');

/**
 * gpt-tokenizer compiles its encoding and builds its tables when it is loaded (0.3 s of one core here), so it is
 * loaded on first use, or shortly after the service answers (`warmUp`): not while the service starts, when that
 * core is busy loading everything else.
 */
let loaded: GptTokenizer | undefined;
/** After the service starts answering: its readiness probe and first requests go first. */
const WARM_UP_AFTER_MS = 500;
const tokenizer = () => (loaded ??= createRequire(import.meta.url)('gpt-tokenizer') as GptTokenizer);

/**
 * Texts longer than this (all of one request's together) are counted in a worker thread: about 3 ms of
 * counting here at most, so one organization's huge prompts cannot stall another's requests. The worker is
 * one thread at the lowest priority, so such counting never takes more than one core and gives way to requests.
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
  warmUp: () => void setTimeout(tokenizer, WARM_UP_AFTER_MS).unref(),
};
