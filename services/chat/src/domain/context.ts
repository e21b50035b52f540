import { type ChatMessage, DomainError } from '@oc/contracts';

/** Tokens a conversation costs: each message's own count plus the fixed overhead of a reply's priming. */
export interface ConversationCounter {
  message(message: ChatMessage): number;
  readonly replyPriming: number;
}

export const conversationTokens = (messages: ChatMessage[], counter: ConversationCounter) =>
  messages.reduce((sum, m) => sum + counter.message(m), counter.replyPriming);

/**
 * The conversation sent upstream must stay under the context limit: the oldest non-system messages
 * are dropped first; system messages and the newest message are always kept. Returns what is kept and
 * what it costs (as `conversationTokens` counts), each message tokenized once.
 */
export function trimToContext(
  messages: ChatMessage[],
  limitTokens: number,
  counter: ConversationCounter,
): { messages: ChatMessage[]; tokens: number } {
  const sizes = messages.map((m) => counter.message(m));
  let tokens = sizes.reduce((a, b) => a + b, counter.replyPriming);
  const dropped = new Set<number>();
  for (let i = 0; tokens >= limitTokens; i++) {
    if (i >= messages.length - 1) {
      throw new DomainError({
        kind: 'InvalidState',
        code: 'context_length_exceeded',
        message: `The messages need ${tokens} tokens, more than the ${limitTokens}-token context allows.`,
        param: 'messages',
      });
    }
    if (messages[i]!.role === 'system') continue;
    dropped.add(i);
    tokens -= sizes[i]!;
  }
  return { messages: dropped.size === 0 ? messages : messages.filter((_, i) => !dropped.has(i)), tokens };
}
