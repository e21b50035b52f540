import { type Clock, type IdSource, type Replicas, repeatByClock } from '@oc/contracts';
import { CommandHandler, type EventStore, type SnapshotStore } from '@oc/eventstore';
import type { DurableEventBus, ServiceClient } from '@oc/messaging';
import { projectInThisThread, type ProjectorFactory, type ReadModelStore, readLatest, readYourWrites } from '@oc/readmodel';
import { type DynamicModule, Module } from '@nestjs/common';
import type { Logger } from 'pino';
import { billingReadModels } from './projections';
import { broadcastNotifier } from './adapters/gateway-notifier';
import { ALERT_TRIGGERS, ALERTS_CONSUMER, AlertsService } from './application/alerts';
import { AutoRechargeService } from './application/auto-recharge';
import { BillingService } from './application/billing';
import { PaymentsService } from './application/payments';
import { stripePayments } from './adapters/stripe';
import { type PaymentSettings, paymentSettings } from './config';
import { ALERTS_SERVICE, AlertsController } from './transport/alerts.controller';
import { AUTO_RECHARGE_SERVICE, AutoRechargeController } from './transport/auto-recharge.controller';
import { BILLING_SERVICE, BillingController, LOGGER } from './transport/billing.controller';
import { PAYMENTS_SERVICE, PaymentsController } from './transport/payments.controller';

export interface BillingRuntime {
  eventStore: EventStore;
  readModels: ReadModelStore;
  /** Where the projections run; in this thread unless the process runs them in a projection thread. */
  projector?: ProjectorFactory;
  /** For the broadcasts that keep gateways' key caches honest. */
  client: ServiceClient;
  clock: Clock;
  ids: IdSource;
  logger: Logger;
  keyBytes?: () => Buffer;
  /** Replicas of billing on the same event store (its own process); alone when absent. */
  replicas?: Replicas;
  /** Where accounts' states are kept every so many events; without it, an account loads from its first event. */
  snapshots?: SnapshotStore;
  /**
   * The products that reserve funds run in this process (standalone), so a crash takes them and billing
   * together: their captures may be answered once decided, the commit shared with the product's next append.
   * (A reservation asking so is answered once decided wherever its product runs.)
   */
  callersInProcess?: boolean;
  /** Top-ups with Stripe (`paymentSettings` of the STRIPE_* and TOPUP_* variables); without a key, top-up is off. */
  payments?: PaymentSettings;
  /**
   * Where billing's own events come back to it, for the alerts' process manager: JetStream over NATS, the event
   * store embedded. Without it no alert is decided (settings are still kept).
   */
  bus?: DurableEventBus;
}

/** How often expired reservations are looked for (by the injected clock). */
export const RESERVATION_SWEEP_MS = 15_000;

@Module({})
export class BillingModule {
  static register(service: BillingService, payments: PaymentsService, alerts: AlertsService, autoRecharge: AutoRechargeService, logger: Logger): DynamicModule {
    return {
      module: BillingModule,
      controllers: [BillingController, PaymentsController, AlertsController, AutoRechargeController],
      providers: [
        { provide: BILLING_SERVICE, useValue: service },
        { provide: PAYMENTS_SERVICE, useValue: payments },
        { provide: ALERTS_SERVICE, useValue: alerts },
        { provide: AUTO_RECHARGE_SERVICE, useValue: autoRecharge },
        { provide: LOGGER, useValue: logger },
      ],
    };
  }
}

/** Builds the billing service and catches its read models up with the event store. */
export async function createBilling(runtime: BillingRuntime) {
  const projections = (runtime.projector ?? projectInThisThread)({
    service: 'billing',
    set: billingReadModels,
    eventStore: runtime.eventStore,
    readModels: runtime.readModels,
    onError: (err) => runtime.logger.error({ err }, 'billing projection stopped'),
  });
  await projections.start();
  const shared = runtime.replicas?.shared ?? false;
  const commands = new CommandHandler(runtime.eventStore, {
    otherWriters: shared,
    snapshots: runtime.snapshots,
  });
  const readModels = shared ? readLatest(runtime.readModels, projections, runtime.eventStore) : readYourWrites(runtime.readModels, projections, commands);
  const service = new BillingService({
    eventStore: runtime.eventStore,
    commands,
    readModels,
    notifier: broadcastNotifier(runtime.client),
    clock: runtime.clock,
    ids: runtime.ids,
    ...(runtime.keyBytes ? { keyBytes: runtime.keyBytes } : {}),
    callersInProcess: runtime.callersInProcess === true && !shared,
  });
  const settings = runtime.payments ?? paymentSettings({});
  const provider = settings.stripe ? stripePayments(settings.stripe, runtime.logger) : undefined;
  const autoRecharge = new AutoRechargeService({
    commands,
    readModels,
    clock: runtime.clock,
    ids: runtime.ids,
    logger: runtime.logger,
    bounds: settings.bounds,
    policy: settings.autoRecharge,
    ...(provider ? { provider } : {}),
  });
  const payments = new PaymentsService({
    commands,
    readModels,
    clock: runtime.clock,
    ids: runtime.ids,
    logger: runtime.logger,
    bounds: settings.bounds,
    autoRecharge,
    ...(provider ? { provider } : {}),
  });
  const alerts = new AlertsService({
    commands,
    readModels,
    store: runtime.readModels,
    projections,
    clock: runtime.clock,
    logger: runtime.logger,
  });
  const alertConsumer = await runtime.bus?.consume(ALERTS_CONSUMER, { service: 'billing', types: ALERT_TRIGGERS }, (event) => alerts.handle(event));
  const expiry = repeatByClock(
    runtime.clock,
    RESERVATION_SWEEP_MS,
    async () => {
      const expired = await service.expireReservations();
      if (expired > 0) runtime.logger.warn({ expired }, 'expired reservations released');
    },
    (err) => runtime.logger.warn({ err }, 'reservation expiry sweep failed; will retry'),
  );
  // Periodic, not on each capture: see docs/decisions.md (auto-recharge). Every replica checks; the stream decides.
  const recharge = provider
    ? repeatByClock(
        runtime.clock,
        settings.autoRecharge.checkSeconds * 1000,
        () => autoRecharge.sweep(),
        (err) => runtime.logger.warn({ err }, 'auto-recharge check failed; will retry'),
      )
    : undefined;
  return {
    service,
    payments,
    alerts,
    autoRecharge,
    module: BillingModule.register(service, payments, alerts, autoRecharge, runtime.logger),
    async close() {
      await recharge?.stop();
      await alertConsumer?.stop();
      await expiry.stop();
      await projections.stop();
    },
  };
}
