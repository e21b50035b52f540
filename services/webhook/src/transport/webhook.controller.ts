import { answer, Subjects, WebhookMessages } from '@oc/contracts';
import { Controller, Inject } from '@nestjs/common';
import { MessagePattern, Payload } from '@nestjs/microservices';
import type { Logger } from 'pino';
import { z } from 'zod';
import { WebhookService } from '../application/webhooks';

export const WEBHOOK_SERVICE = Symbol('WebhookService');
export const LOGGER = Symbol('Logger');

/** Binds the webhook service's subjects to its application service; every answer is a Reply value. */
@Controller()
export class WebhookController {
  constructor(
    @Inject(WEBHOOK_SERVICE) private readonly webhooks: WebhookService,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  private readonly unexpected = (err: unknown) => this.logger.error({ err }, 'webhook request failed');

  @MessagePattern(Subjects.webhook.create)
  create(@Payload() p: unknown) {
    return answer(WebhookMessages.create, p, (m) => this.webhooks.create(m), this.unexpected);
  }

  @MessagePattern(Subjects.webhook.list)
  list(@Payload() p: unknown) {
    return answer(WebhookMessages.list, p, (m) => this.webhooks.list(m), this.unexpected);
  }

  @MessagePattern(Subjects.webhook.get)
  get(@Payload() p: unknown) {
    return answer(WebhookMessages.get, p, (m) => this.webhooks.get(m), this.unexpected);
  }

  @MessagePattern(Subjects.webhook.update)
  update(@Payload() p: unknown) {
    return answer(WebhookMessages.update, p, (m) => this.webhooks.update(m), this.unexpected);
  }

  @MessagePattern(Subjects.webhook.delete)
  delete(@Payload() p: unknown) {
    return answer(WebhookMessages.delete, p, (m) => this.webhooks.delete(m), this.unexpected);
  }

  @MessagePattern(Subjects.webhook.test)
  test(@Payload() p: unknown) {
    return answer(WebhookMessages.test, p, (m) => this.webhooks.test(m), this.unexpected);
  }

  @MessagePattern(Subjects.webhook.rotateSecret)
  rotateSecret(@Payload() p: unknown) {
    return answer(WebhookMessages.rotateSecret, p, (m) => this.webhooks.rotateSecret(m), this.unexpected);
  }

  @MessagePattern(Subjects.webhook.listDeliveries)
  listDeliveries(@Payload() p: unknown) {
    return answer(WebhookMessages.listDeliveries, p, (m) => this.webhooks.listDeliveries(m), this.unexpected);
  }

  @MessagePattern(Subjects.webhook.retryDelivery)
  retryDelivery(@Payload() p: unknown) {
    return answer(WebhookMessages.retryDelivery, p, (m) => this.webhooks.retryDelivery(m), this.unexpected);
  }

  @MessagePattern(Subjects.webhook.recover)
  recover(@Payload() p: unknown) {
    return answer(WebhookMessages.recover, p, (m) => this.webhooks.recover(m), this.unexpected);
  }

  @MessagePattern(Subjects.webhook.replayEvents)
  replayEvents(@Payload() p: unknown) {
    return answer(WebhookMessages.replayEvents, p, async (m) => this.webhooks.replayEvents(m), this.unexpected);
  }

  @MessagePattern(Subjects.webhook.ping)
  ping(@Payload() p: unknown) {
    return answer(z.unknown(), p, () => this.webhooks.ping(), this.unexpected);
  }
}
