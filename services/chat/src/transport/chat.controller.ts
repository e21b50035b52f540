import { answer, CancelStreamSchema, ChatMessages, Subjects, watchTo } from '@oc/contracts';
import { headersOf, type MessageContext } from '@oc/messaging';
import { Controller, Inject } from '@nestjs/common';
import { Ctx, MessagePattern, Payload } from '@nestjs/microservices';
import { z } from 'zod';
import type { Logger } from 'pino';
import { ChatService } from '../application/chat';

export const CHAT_SERVICE = Symbol('ChatService');
export const LOGGER = Symbol('Logger');

/** Binds chat's subjects to its application service; every answer is a Reply value. */
@Controller()
export class ChatController {
  constructor(
    @Inject(CHAT_SERVICE) private readonly chat: ChatService,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  private readonly unexpected = (err: unknown) => this.logger.error({ err }, 'chat request failed');

  @MessagePattern(Subjects.chat.createChatCompletion)
  createChatCompletion(@Payload() p: unknown, @Ctx() ctx: MessageContext) {
    const watch = watchTo(headersOf(ctx));
    return answer(ChatMessages.createChatCompletion, p, (m) => this.chat.createChatCompletion(m, watch === undefined ? {} : { watchTo: watch }), this.unexpected);
  }

  @MessagePattern(Subjects.chat.createCompletion)
  createCompletion(@Payload() p: unknown, @Ctx() ctx: MessageContext) {
    return answer(ChatMessages.createCompletion, p, (m) => this.chat.createCompletion(m, watchTo(headersOf(ctx))), this.unexpected);
  }

  @MessagePattern(Subjects.chat.listSessions)
  listSessions(@Payload() p: unknown) {
    return answer(ChatMessages.listSessions, p, (m) => this.chat.listSessions(m), this.unexpected);
  }

  @MessagePattern(Subjects.chat.getSession)
  getSession(@Payload() p: unknown) {
    return answer(ChatMessages.getSession, p, (m) => this.chat.getSession(m), this.unexpected);
  }

  @MessagePattern(Subjects.chat.deployments)
  deployments(@Payload() p: unknown) {
    return answer(z.unknown(), p, async () => ({ object: 'list' as const, data: this.chat.deployments() }), this.unexpected);
  }

  @MessagePattern(Subjects.chat.ping)
  ping(@Payload() p: unknown) {
    return answer(z.unknown(), p, () => this.chat.ping(), this.unexpected);
  }
}

/** Cancels arrive as broadcasts (every replica hears them), not as requests to one of them. */
export function onCancelStream(chat: ChatService, logger: Logger) {
  return (payload: unknown) => {
    const parsed = CancelStreamSchema.safeParse(payload);
    if (parsed.success) chat.cancelStream(parsed.data.stream_to);
    else logger.warn({ payload }, 'malformed stream cancel ignored');
  };
}
