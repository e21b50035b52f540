import { ActivityMessages, ActivitySubjects, answer, BillingMessages, Subjects } from '@oc/contracts';
import { Controller, Inject } from '@nestjs/common';
import { MessagePattern, Payload } from '@nestjs/microservices';
import { z } from 'zod';
import type { Logger } from 'pino';
import { BillingService } from '../application/billing';

export const BILLING_SERVICE = Symbol('BillingService');
export const LOGGER = Symbol('Logger');

/** Binds billing's subjects to its application service; every answer is a Reply value. */
@Controller()
export class BillingController {
  constructor(
    @Inject(BILLING_SERVICE) private readonly billing: BillingService,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  private readonly unexpected = (err: unknown) => this.logger.error({ err }, 'billing request failed');

  @MessagePattern(Subjects.billing.createOrganization)
  createOrganization(@Payload() p: unknown) {
    return answer(BillingMessages.createOrganization, p, (m) => this.billing.createOrganization(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.listOrganizations)
  listOrganizations(@Payload() p: unknown) {
    return answer(BillingMessages.listOrganizations, p, (m) => this.billing.listOrganizations(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.getOrganization)
  getOrganization(@Payload() p: unknown) {
    return answer(BillingMessages.getOrganization, p, (m) => this.billing.getOrganization(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.updateOrganization)
  updateOrganization(@Payload() p: unknown) {
    return answer(BillingMessages.updateOrganization, p, (m) => this.billing.updateOrganization(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.addCredits)
  addCredits(@Payload() p: unknown) {
    return answer(BillingMessages.addCredits, p, (m) => this.billing.addCredits(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.getBalance)
  getBalance(@Payload() p: unknown) {
    return answer(BillingMessages.getBalance, p, (m) => this.billing.getBalance(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.listLedger)
  listLedger(@Payload() p: unknown) {
    return answer(BillingMessages.listLedger, p, (m) => this.billing.listLedger(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.createApiKey)
  createApiKey(@Payload() p: unknown) {
    return answer(BillingMessages.createApiKey, p, (m) => this.billing.createApiKey(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.listApiKeys)
  listApiKeys(@Payload() p: unknown) {
    return answer(BillingMessages.listApiKeys, p, (m) => this.billing.listApiKeys(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.updateApiKey)
  updateApiKey(@Payload() p: unknown) {
    return answer(BillingMessages.updateApiKey, p, (m) => this.billing.updateApiKey(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.revokeApiKey)
  revokeApiKey(@Payload() p: unknown) {
    return answer(BillingMessages.revokeApiKey, p, (m) => this.billing.revokeApiKey(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.authenticate)
  authenticate(@Payload() p: unknown) {
    return answer(BillingMessages.authenticate, p, (m) => this.billing.authenticate(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.recordKeyUsage)
  recordKeyUsage(@Payload() p: unknown) {
    return answer(BillingMessages.recordKeyUsage, p, (m) => this.billing.recordKeyUsage(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.reserveFunds)
  reserveFunds(@Payload() p: unknown) {
    return answer(BillingMessages.reserveFunds, p, (m) => this.billing.reserveFunds(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.captureReservation)
  captureReservation(@Payload() p: unknown) {
    return answer(BillingMessages.captureReservation, p, (m) => this.billing.captureReservation(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.releaseReservation)
  releaseReservation(@Payload() p: unknown) {
    return answer(BillingMessages.releaseReservation, p, (m) => this.billing.releaseReservation(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.listReservationHolders)
  listReservationHolders(@Payload() p: unknown) {
    return answer(BillingMessages.listReservationHolders, p, (m) => this.billing.listReservationHolders(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.releaseHeldReservations)
  releaseHeldReservations(@Payload() p: unknown) {
    return answer(BillingMessages.releaseHeldReservations, p, (m) => this.billing.releaseHeldReservations(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.dailySpend)
  dailySpend(@Payload() p: unknown) {
    return answer(BillingMessages.dailySpend, p, (m) => this.billing.dailySpend(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.keyDailyUsage)
  keyDailyUsage(@Payload() p: unknown) {
    return answer(BillingMessages.keyDailyUsage, p, (m) => this.billing.keyDailyUsage(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.providerUsage)
  providerUsage(@Payload() p: unknown) {
    return answer(BillingMessages.providerUsage, p, (m) => this.billing.providerUsage(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.keyUsage)
  keyUsage(@Payload() p: unknown) {
    return answer(BillingMessages.keyUsage, p, (m) => this.billing.keyUsage(m), this.unexpected);
  }

  @MessagePattern(ActivitySubjects.listActivity)
  listActivity(@Payload() p: unknown) {
    return answer(ActivityMessages.listActivity, p, (m) => this.billing.activity.list(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.createMember)
  createMember(@Payload() p: unknown) {
    return answer(BillingMessages.createMember, p, (m) => this.billing.createMember(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.listMembers)
  listMembers(@Payload() p: unknown) {
    return answer(BillingMessages.listMembers, p, (m) => this.billing.listMembers(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.removeMember)
  removeMember(@Payload() p: unknown) {
    return answer(BillingMessages.removeMember, p, (m) => this.billing.removeMember(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.memberCredentials)
  memberCredentials(@Payload() p: unknown) {
    return answer(BillingMessages.memberCredentials, p, (m) => this.billing.memberCredentials(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.startConsoleSession)
  startConsoleSession(@Payload() p: unknown) {
    return answer(BillingMessages.startConsoleSession, p, (m) => this.billing.startConsoleSession(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.authenticateConsoleSession)
  authenticateConsoleSession(@Payload() p: unknown) {
    return answer(BillingMessages.authenticateConsoleSession, p, (m) => this.billing.authenticateConsoleSession(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.endConsoleSession)
  endConsoleSession(@Payload() p: unknown) {
    return answer(BillingMessages.endConsoleSession, p, (m) => this.billing.endConsoleSession(m), this.unexpected);
  }

  @MessagePattern(Subjects.billing.ping)
  ping(@Payload() p: unknown) {
    return answer(z.unknown(), p, () => this.billing.ping(), this.unexpected);
  }
}
