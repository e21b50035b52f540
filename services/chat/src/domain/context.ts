import { type ChatMessage, DomainError, isInstruction } from '@oc/contracts';

/** Tokens OpenAI counts around each message's content, and for the priming of the reply. */
export const MESSAGE_FRAMING_TOKENS = 4;
export const REPLY_PRIMING_TOKENS = 3;

/** Tokens a conversation costs, from the token count of each message's content (and what is always sent besides). */
export const conversationTokens = (contentTokens: readonly number[], fixedTokens = 0) =>
  contentTokens.reduce((sum, n) => sum + n + MESSAGE_FRAMING_TOKENS, REPLY_PRIMING_TOKENS + fixedTokens);

/**
 * The conversation sent upstream must stay under the context limit: the oldest non-instruction messages are
 * dropped first; system and developer messages and the newest message are always kept. A dropped assistant turn of
 * tool calls takes the tool results that answer it along (a result without its call is no conversation a provider
 * reads). Takes the token count of each message's content (counts past the limit may be capped: they are dropped
 * or refused all the same) and the tokens always sent besides (tool definitions, a response schema), and returns
 * what is kept and what it costs.
 */
export function trimToContext(
  messages: ChatMessage[],
  contentTokens: readonly number[],
  limitTokens: number,
  fixedTokens = 0,
): { messages: ChatMessage[]; tokens: number } {
  const sizes = contentTokens.map((n) => n + MESSAGE_FRAMING_TOKENS);
  let tokens = conversationTokens(contentTokens, fixedTokens);
  const dropped = new Set<number>();
  const last = messages.length - 1;
  for (let i = 0; tokens >= limitTokens; i++) {
    if (i >= last) {
      throw new DomainError({
        kind: 'InvalidState',
        code: 'context_length_exceeded',
        message: `The messages need at least ${tokens} tokens, more than the ${limitTokens}-token context allows.`,
        param: 'messages',
      });
    }
    const message = messages[i]!;
    if (isInstruction(message) || dropped.has(i)) continue;
    dropped.add(i);
    tokens -= sizes[i]!;
    if (message.role === 'assistant' && message.tool_calls !== undefined) {
      for (let j = i + 1; j < last && messages[j]!.role === 'tool'; j++) {
        dropped.add(j);
        tokens -= sizes[j]!;
      }
    }
  }
  return { messages: dropped.size === 0 ? messages : messages.filter((_, i) => !dropped.has(i)), tokens };
}
