import { type BillingEvent, ManualClock } from '@oc/contracts';
import { CommandHandler, SqliteEventStore } from '@oc/eventstore';
import { ProjectionRunner, SqliteReadModelStore } from '@oc/readmodel';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { AlertsService } from '../src/application/alerts';
import { alertStream } from '../src/domain/alerts';
import { billingReadModels } from '../src/projections';

/** Noon on 20 December 2026 (ms). */
const NOW = Date.UTC(2026, 11, 20, 12);
const USD = 1_000_000;
const ORG = 'org_a';

const closing: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});

/**
 * Two replicas of billing's alert process manager on one event store (each its own command handler, as two
 * processes would have), handed the same account events at once and again: every alert is stored once.
 */
async function replicas() {
  const clock = new ManualClock(NOW);
  const eventStore = new SqliteEventStore({ filename: ':memory:', clock });
  const readModels = new SqliteReadModelStore({ filename: ':memory:' });
  const runner = new ProjectionRunner(eventStore, readModels, billingReadModels.projections, { collections: billingReadModels.collections });
  closing.push(() => eventStore.close(), () => readModels.close(), () => runner.stop());
  await runner.start();
  const services = [0, 1].map(
    () =>
      new AlertsService({
        commands: new CommandHandler(eventStore, { otherWriters: true }),
        readModels,
        store: readModels,
        projections: runner,
        clock,
        logger: pino({ level: 'silent' }),
      }),
  );
  const append = async (event: BillingEvent, stream = `account-${ORG}`) => {
    await eventStore.appendToStream(stream, [event], { expectedRevision: 'any' });
    return (await eventStore.readStream(stream)).at(-1)!;
  };
  const alerts = async () => (await eventStore.readStream(alertStream(ORG))).map((e) => [e.type, (e.data as { threshold?: number }).threshold]);
  return { services, append, alerts };
}

describe('billing alerts under concurrency', () => {
  it('stores each threshold and balance.low once when two replicas handle the same events at once, repeatedly', async () => {
    const { services, append, alerts } = await replicas();
    await append({ type: 'OrganizationCreated', data: { org_id: ORG, name: 'Acme', tier: 'standard', created: NOW / 1000 } });
    await append({ type: 'CreditsAdded', data: { org_id: ORG, amount_micros: 10 * USD, description: 'Credit' } });
    await append(
      { type: 'OrganizationAlertsChanged', data: { org_id: ORG, monthly_budget_micros: 4 * USD, budget_thresholds: [50, 80, 100], low_balance_micros: 7 * USD } },
      alertStream(ORG),
    );
    await append({ type: 'FundsReserved', data: { org_id: ORG, reservation_id: 'r1', amount_micros: 5 * USD, description: 'Video' } });
    // $3.40 of a $4 budget (85%) and a balance of $6.60, below $7.
    const capture = await append({ type: 'ReservationCaptured', data: { org_id: ORG, reservation_id: 'r1', amount_micros: 3.4 * USD, released_micros: 1.6 * USD } });

    await Promise.all([...services, ...services, ...services].map((s) => s.handle(capture)));

    expect(await alerts()).toEqual([
      ['OrganizationAlertsChanged', undefined],
      ['BudgetThresholdCrossed', 50],
      ['BudgetThresholdCrossed', 80],
      ['BalanceLow', undefined],
    ]);
  });
});
