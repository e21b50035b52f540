import { describe, expect, it } from 'vitest';
import { Allowances } from '../src/application/allowances';

/** Whether `promise` has settled once everything already queued has run. */
const settledYet = async (promise: Promise<unknown>) => {
  let settled = false;
  void promise.then(() => (settled = true));
  await new Promise<void>((resolve) => setImmediate(resolve));
  return settled;
};

describe('Allowances', () => {
  it("grants a key's takers at once while they fit, and the next once enough is given back", async () => {
    const allowances = new Allowances(10);
    const giveBackFirst = await allowances.take('org_a', 6);
    await allowances.take('org_a', 4);
    const third = allowances.take('org_a', 3);
    expect(await settledYet(third)).toBe(false);

    giveBackFirst();
    expect(await settledYet(third)).toBe(true);
  });

  it('lets no later taker overtake an earlier one that is still waiting, and takes a request over the capacity as the whole of it', async () => {
    const allowances = new Allowances(10);
    const giveBack = await allowances.take('org_a', 5);
    const whole = allowances.take('org_a', 50);
    const small = allowances.take('org_a', 1);
    expect(await settledYet(whole)).toBe(false);
    expect(await settledYet(small)).toBe(false);

    giveBack();
    const giveBackWhole = await whole;
    expect(await settledYet(small)).toBe(false);
    giveBackWhole();
    expect(await settledYet(small)).toBe(true);
  });

  it("never makes one key wait for another's", async () => {
    const allowances = new Allowances(10);
    await allowances.take('org_a', 10);
    expect(await settledYet(allowances.take('org_b', 10))).toBe(true);
  });

  it('gives back once however often it is given back, and keeps nothing of a key with nothing taken', async () => {
    const allowances = new Allowances(10);
    const giveBack = await allowances.take('org_a', 6);
    const next = allowances.take('org_a', 6);
    const afterNext = allowances.take('org_a', 6);
    giveBack();
    giveBack();
    const giveBackNext = await next;
    expect(await settledYet(afterNext)).toBe(false);
    giveBackNext();
    (await afterNext)();
    expect(allowances.size).toBe(0);
  });
});
