import { answer, AutoRechargeMessages, Subjects } from '@oc/contracts';
import { Controller, Inject } from '@nestjs/common';
import { MessagePattern, Payload } from '@nestjs/microservices';
import type { Logger } from 'pino';
import { AutoRechargeService } from '../application/auto-recharge';
import { LOGGER } from './billing.controller';

export const AUTO_RECHARGE_SERVICE = Symbol('AutoRechargeService');

/** Binds the auto-recharge subjects to its service; every answer is a Reply value. */
@Controller()
export class AutoRechargeController {
  constructor(
    @Inject(AUTO_RECHARGE_SERVICE) private readonly autoRecharge: AutoRechargeService,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  private readonly unexpected = (err: unknown) => this.logger.error({ err }, 'auto-recharge request failed');

  @MessagePattern(Subjects.billing.getAutoRecharge)
  get(@Payload() p: unknown) {
    return answer(AutoRechargeMessages.getAutoRecharge, p, (m) => this.autoRecharge.get(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.configureAutoRecharge)
  configure(@Payload() p: unknown) {
    return answer(AutoRechargeMessages.configureAutoRecharge, p, (m) => this.autoRecharge.configure(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.startCardSetup)
  startCardSetup(@Payload() p: unknown) {
    return answer(AutoRechargeMessages.startCardSetup, p, (m) => this.autoRecharge.startCardSetup(m), this.unexpected);
  }
}
