import { answer, ResponseMessages, Subjects, watchTo } from '@oc/contracts';
import { headersOf, type MessageContext } from '@oc/messaging';
import { Controller, Inject } from '@nestjs/common';
import { Ctx, MessagePattern, Payload } from '@nestjs/microservices';
import type { Logger } from 'pino';
import { ResponsesService } from '../application/responses';
import { LOGGER } from './chat.controller';

export const RESPONSES_SERVICE = Symbol('ResponsesService');

/** Binds the Responses API's subjects to its application service; every answer is a Reply value. */
@Controller()
export class ResponsesController {
  constructor(
    @Inject(RESPONSES_SERVICE) private readonly responses: ResponsesService,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  private readonly unexpected = (err: unknown) => this.logger.error({ err }, 'responses request failed');

  @MessagePattern(Subjects.chat.createResponse)
  create(@Payload() p: unknown, @Ctx() ctx: MessageContext) {
    return answer(ResponseMessages.create, p, (m) => this.responses.create(m, watchTo(headersOf(ctx))), this.unexpected);
  }

  @MessagePattern(Subjects.chat.getResponse)
  get(@Payload() p: unknown) {
    return answer(ResponseMessages.get, p, (m) => this.responses.get(m), this.unexpected);
  }

  @MessagePattern(Subjects.chat.deleteResponse)
  delete(@Payload() p: unknown) {
    return answer(ResponseMessages.delete, p, (m) => this.responses.delete(m), this.unexpected);
  }

  @MessagePattern(Subjects.chat.listResponseInputItems)
  listInputItems(@Payload() p: unknown) {
    return answer(ResponseMessages.listInputItems, p, (m) => this.responses.listInputItems(m), this.unexpected);
  }
}
