import { countTokens } from 'gpt-tokenizer';
import type { Tokenizer } from '../application/ports';

/**
 * Counts with gpt-tokenizer's default encoding (o200k_base, pure JavaScript, no download). A chat
 * message costs its content plus 4 tokens of framing, and a reply's priming 3 more, as OpenAI counts.
 */
export const gptTokenizer: Tokenizer = {
  count: (text) => countTokens(text),
  message: (message) => countTokens(message.content) + 4,
  replyPriming: 3,
};
