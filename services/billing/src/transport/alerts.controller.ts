import { answer, BillingAlertMessages, BillingAlertSubjects } from '@oc/contracts';
import { Controller, Inject } from '@nestjs/common';
import { MessagePattern, Payload } from '@nestjs/microservices';
import type { Logger } from 'pino';
import { AlertsService } from '../application/alerts';
import { BillingService } from '../application/billing';
import { BILLING_SERVICE, LOGGER } from './billing.controller';

export const ALERTS_SERVICE = Symbol('AlertsService');

/** An organization's alert settings; answers the organization as it is after the change. */
@Controller()
export class AlertsController {
  constructor(
    @Inject(ALERTS_SERVICE) private readonly alerts: AlertsService,
    @Inject(BILLING_SERVICE) private readonly billing: BillingService,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  private readonly unexpected = (err: unknown) => this.logger.error({ err }, 'billing alerts request failed');

  @MessagePattern(BillingAlertSubjects.updateOrganizationAlerts)
  updateOrganizationAlerts(@Payload() p: unknown) {
    return answer(
      BillingAlertMessages.updateOrganizationAlerts,
      p,
      async (m) => {
        await this.alerts.updateAlerts(m);
        return this.billing.getOrganization(m);
      },
      this.unexpected,
    );
  }
}
