import { createRequire } from 'node:module';
import type { Tokenizer } from '../application/ports';

type GptTokenizer = typeof import('gpt-tokenizer');

/**
 * gpt-tokenizer builds its encoding tables (about 0.1 s of CPU) when it is loaded, so it is loaded on first
 * use, or just after start (`warmUp`), rather than while the service starts.
 */
let loaded: GptTokenizer | undefined;
const tokenizer = () => (loaded ??= createRequire(import.meta.url)('gpt-tokenizer') as GptTokenizer);

/**
 * Counts with gpt-tokenizer's default encoding (o200k_base, pure JavaScript, no download). A chat
 * message costs its content plus 4 tokens of framing, and a reply's priming 3 more, as OpenAI counts.
 */
export const gptTokenizer: Tokenizer & { warmUp(): void } = {
  count: (text) => tokenizer().countTokens(text),
  message: (message) => tokenizer().countTokens(message.content) + 4,
  replyPriming: 3,
  warmUp: () => void setTimeout(tokenizer, 0).unref(),
};
