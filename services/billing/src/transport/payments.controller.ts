import { answer, PaymentMessages, Subjects } from '@oc/contracts';
import { Controller, Inject } from '@nestjs/common';
import { MessagePattern, Payload } from '@nestjs/microservices';
import type { Logger } from 'pino';
import { PaymentsService } from '../application/payments';
import { LOGGER } from './billing.controller';

export const PAYMENTS_SERVICE = Symbol('PaymentsService');

/** Binds the top-up subjects to the payments service; every answer is a Reply value. */
@Controller()
export class PaymentsController {
  constructor(
    @Inject(PAYMENTS_SERVICE) private readonly payments: PaymentsService,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  private readonly unexpected = (err: unknown) => this.logger.error({ err }, 'payments request failed');

  @MessagePattern(Subjects.billing.startTopUp)
  startTopUp(@Payload() p: unknown) {
    return answer(PaymentMessages.startTopUp, p, (m) => this.payments.startTopUp(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.stripeWebhook)
  stripeWebhook(@Payload() p: unknown) {
    return answer(PaymentMessages.stripeWebhook, p, (m) => this.payments.stripeWebhook(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.listPayments)
  listPayments(@Payload() p: unknown) {
    return answer(PaymentMessages.listPayments, p, (m) => this.payments.listPayments(m), this.unexpected);
  }
}
