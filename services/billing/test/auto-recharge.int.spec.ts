import { type BillingEvent, ManualClock, sortableIds } from '@oc/contracts';
import { CommandHandler, SqliteEventStore } from '@oc/eventstore';
import { ProjectionRunner, SqliteReadModelStore } from '@oc/readmodel';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AutoRechargeService } from '../src/application/auto-recharge';
import type { PaymentProvider } from '../src/application/payments';
import { autoRechargeStream } from '../src/domain/auto-recharge';
import { billingReadModels } from '../src/projections';
import { Collections } from '../src/projections/documents';

const NOW = Date.UTC(2026, 11, 20, 12);
const USD = 1_000_000;
const ORG = 'org_a';

const closing: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});

/**
 * Two replicas of billing on one event store (each its own command handler, as two processes would have), both
 * finding the balance below the threshold at once and again: one attempt, one PaymentIntent.
 */
describe('auto-recharge across replicas', () => {
  it('starts one attempt and charges once when two replicas check the same low balance at once, repeatedly', async () => {
    const clock = new ManualClock(NOW);
    const eventStore = new SqliteEventStore({ filename: ':memory:', clock });
    const readModels = new SqliteReadModelStore({ filename: ':memory:' });
    const runner = new ProjectionRunner(eventStore, readModels, billingReadModels.projections, { collections: billingReadModels.collections });
    closing.push(() => eventStore.close(), () => readModels.close(), () => runner.stop());
    await runner.start();

    const charges: string[] = [];
    const provider = {
      async chargeOffSession(input) {
        charges.push(input.attemptId);
        // Stripe takes a while: the other replica checks meanwhile.
        await new Promise((resolve) => setImmediate(resolve));
        return { outcome: 'succeeded', paymentId: `pi_${charges.length}` };
      },
    } as Pick<PaymentProvider, 'chargeOffSession'> as PaymentProvider;
    const replicas = [0, 1].map(
      () =>
        new AutoRechargeService({
          commands: new CommandHandler(eventStore, { otherWriters: true }),
          readModels,
          clock,
          ids: sortableIds,
          logger: pino({ level: 'silent' }),
          provider,
          bounds: { minMicros: 5 * USD, maxMicros: 500 * USD },
          policy: { cooldownSeconds: 600, maxFailures: 3 },
        }),
    );
    const append = (event: BillingEvent, stream: string) => eventStore.appendToStream(stream, [event], { expectedRevision: 'any' });
    await append({ type: 'OrganizationCreated', data: { org_id: ORG, name: 'Acme', tier: 'standard', created: NOW / 1000 } }, `account-${ORG}`);
    await append({ type: 'CreditsAdded', data: { org_id: ORG, amount_micros: 2 * USD, description: 'Credit' } }, `account-${ORG}`);
    await append({ type: 'AutoRechargeConfigured', data: { org_id: ORG, enabled: true, threshold_micros: 5 * USD, amount_micros: 20 * USD } }, autoRechargeStream(ORG));
    await append(
      { type: 'AutoRechargePaymentMethodSaved', data: { org_id: ORG, customer_id: 'cus_1', payment_method_id: 'pm_1', setup_intent_id: 'seti_1', saved_at: NOW / 1000 } },
      autoRechargeStream(ORG),
    );
    await vi.waitFor(async () => expect(await readModels.collection(Collections.organizations).findOne({ _id: ORG })).toMatchObject({ balance_micros: 2 * USD }));

    await Promise.all([...replicas, ...replicas, ...replicas].flatMap((r) => [r.check(ORG), r.sweep()]));

    expect(charges).toEqual([`autorecharge_${ORG}_1`]);
    const types = (await eventStore.readStream(autoRechargeStream(ORG))).map((e) => e.type);
    expect(types.filter((t) => t === 'AutoRechargeStarted')).toHaveLength(1);
    expect(types.at(-1)).toBe('AutoRechargeSucceeded');
  });
});
