// Token counting bounded in time, in plain JavaScript so that it runs as a worker thread from the sources
// (tests, tsx) and from a bundle alike. `tokenizer.ts` counts small texts in its own thread with it, and
// large ones in a worker, so that one huge prompt never holds up other requests.
import { setPriority } from 'node:os';
import { isMainThread, parentPort, workerData } from 'node:worker_threads';

// Byte-pair merging is quadratic in the length of one pre-token piece, and a run of letters, of spaces or of
// punctuation is one piece: 8,000 letters take 40 ms, a megabyte minutes. Such runs are counted in slices,
// in linear time; ordinary text has no such runs, so its count is unchanged.
const LONG_RUN = /[\p{L}\p{M}]{256,}|\s{256,}|[^\s\p{L}\p{M}\p{N}]{256,}/gu;
const SLICE = 256;

/** Tokens in `text` by `lib` (gpt-tokenizer); past `cap`, counting stops and `cap + 1` is returned. */
export function countBounded(lib, text, cap) {
  let total = 0;
  const add = (part) => {
    if (part.length === 0) return true;
    const within = lib.isWithinTokenLimit(part, cap - total);
    total = within === false ? cap + 1 : total + within;
    return total <= cap;
  };
  let from = 0;
  for (const run of text.matchAll(LONG_RUN)) {
    if (!add(text.slice(from, run.index))) return total;
    for (let i = 0; i < run[0].length; i += SLICE) if (!add(run[0].slice(i, i + SLICE))) return total;
    from = run.index + run[0].length;
  }
  add(text.slice(from));
  return total;
}

if (!isMainThread && workerData?.role === 'oc-token-counter') {
  // Counting huge prompts is one organization's work that may take a whole core for a second: at the lowest
  // priority, the threads answering everyone else's requests get the CPU first. On Linux a nice value is a
  // thread's own (setpriority on "0" is the calling thread); elsewhere it would be the whole process's.
  if (process.platform === 'linux') setPriority(19);
  const lib = await import('gpt-tokenizer');
  parentPort.on('message', (message) => {
    if (message.kind === 'close') {
      parentPort.close();
      return;
    }
    try {
      parentPort.postMessage({ id: message.id, result: message.texts.map((text) => countBounded(lib, text, message.cap)) });
    } catch (error) {
      parentPort.postMessage({ id: message.id, error: error instanceof Error ? error.message : String(error) });
    }
  });
}
