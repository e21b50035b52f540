import { type ChatMessage, contentText, type FunctionTool, type ResponseFormat, type StoredChatMessage } from '@oc/contracts';
import { imageTokens } from './image-tokens';

/**
 * What a message costs besides its framing: the text our tokenizer counts (its text, or its tool calls' names and
 * arguments, or the id a tool result answers) and the image tokens counted apart (image-tokens.ts).
 */
export function messageCost(message: ChatMessage): { text: string; imageTokens: number } {
  let text = contentText(message.content);
  let images = 0;
  if (message.role === 'user' && Array.isArray(message.content)) {
    for (const part of message.content) if (part.type === 'image_url') images += imageTokens(part);
  }
  if (message.role === 'assistant') for (const call of message.tool_calls ?? []) text += `\n${call.function.name}\n${call.function.arguments}`;
  if (message.role === 'tool') text = `${message.tool_call_id}\n${text}`;
  if (message.role !== 'tool' && message.name !== undefined) text = `${message.name}\n${text}`;
  return { text, imageTokens: images };
}

/**
 * The text the request's tool definitions and response schema cost: OpenAI counts them in the prompt (in a format
 * it does not document), so their JSON is counted as text. An estimate like the provider's own, and what is
 * reserved for; a provider that reports more is charged no more than the reservation.
 */
export function definitionsText(tools: readonly FunctionTool[] | undefined, format: ResponseFormat | undefined): string {
  const parts: string[] = [];
  if (tools && tools.length > 0) parts.push(JSON.stringify(tools));
  if (format?.type === 'json_schema') parts.push(JSON.stringify(format.json_schema));
  return parts.join('\n');
}

/** A message as the session keeps it. */
export function toStored(message: ChatMessage, createdAt: number): StoredChatMessage {
  return {
    role: message.role,
    content: message.content ?? null,
    ...(message.role !== 'tool' && message.name !== undefined ? { name: message.name } : {}),
    ...(message.role === 'assistant' && message.tool_calls !== undefined ? { tool_calls: message.tool_calls } : {}),
    ...(message.role === 'tool' ? { tool_call_id: message.tool_call_id } : {}),
    created_at: createdAt,
  };
}

/** A stored message as it is sent again when the session continues. */
export function fromStored(stored: StoredChatMessage): ChatMessage {
  const name = stored.name !== undefined ? { name: stored.name } : {};
  const text = (content: StoredChatMessage['content']) => (Array.isArray(content) ? contentText(content) : (content ?? ''));
  switch (stored.role) {
    case 'user':
      return { role: 'user', content: stored.content ?? '', ...name };
    case 'assistant':
      return {
        role: 'assistant',
        content: Array.isArray(stored.content) ? contentText(stored.content) : stored.content,
        ...name,
        ...(stored.tool_calls !== undefined ? { tool_calls: stored.tool_calls } : {}),
      };
    case 'tool':
      return { role: 'tool', tool_call_id: stored.tool_call_id ?? '', content: text(stored.content) };
    case 'system':
    case 'developer':
      return { role: stored.role, content: text(stored.content), ...name };
  }
}
