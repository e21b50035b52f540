import { type ChatMessage, DomainError } from '@oc/contracts';

/** Tokens OpenAI counts around each message's content, and for the priming of the reply. */
export const MESSAGE_FRAMING_TOKENS = 4;
export const REPLY_PRIMING_TOKENS = 3;

/** Tokens a conversation costs, from the token count of each message's content. */
export const conversationTokens = (contentTokens: readonly number[]) =>
  contentTokens.reduce((sum, n) => sum + n + MESSAGE_FRAMING_TOKENS, REPLY_PRIMING_TOKENS);

/**
 * The conversation sent upstream must stay under the context limit: the oldest non-system messages
 * are dropped first; system messages and the newest message are always kept. Takes the token count of
 * each message's content (counts past the limit may be capped: they are dropped or refused all the same)
 * and returns what is kept and what it costs.
 */
export function trimToContext(
  messages: ChatMessage[],
  contentTokens: readonly number[],
  limitTokens: number,
): { messages: ChatMessage[]; tokens: number } {
  const sizes = contentTokens.map((n) => n + MESSAGE_FRAMING_TOKENS);
  let tokens = conversationTokens(contentTokens);
  const dropped = new Set<number>();
  for (let i = 0; tokens >= limitTokens; i++) {
    if (i >= messages.length - 1) {
      throw new DomainError({
        kind: 'InvalidState',
        code: 'context_length_exceeded',
        message: `The messages need at least ${tokens} tokens, more than the ${limitTokens}-token context allows.`,
        param: 'messages',
      });
    }
    if (messages[i]!.role === 'system') continue;
    dropped.add(i);
    tokens -= sizes[i]!;
  }
  return { messages: dropped.size === 0 ? messages : messages.filter((_, i) => !dropped.has(i)), tokens };
}
