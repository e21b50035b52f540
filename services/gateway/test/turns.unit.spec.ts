import { describe, expect, it } from 'vitest';
import { Turns } from '../src/application/turns';

describe('Turns', () => {
  it("gives a key's turns in the order asked, each once the one before has ended", async () => {
    const turns = new Turns();
    const order: string[] = [];
    const endFirst = await turns.turn('org_a');
    const second = turns.turn('org_a').then((end) => (order.push('second'), end));
    const third = turns.turn('org_a').then((end) => (order.push('third'), end));
    await Promise.resolve();
    expect(order).toEqual([]);

    endFirst();
    (await second)();
    (await third)();
    expect(order).toEqual(['second', 'third']);
  });

  it("never makes one key wait for another's turn", async () => {
    const turns = new Turns();
    await turns.turn('org_a');
    const other = await turns.turn('org_b');
    expect(typeof other).toBe('function');
  });

  it('ends a turn once however often it is ended, and keeps no turn of an idle key', async () => {
    const turns = new Turns();
    const end = await turns.turn('org_a');
    const next = turns.turn('org_a');
    const afterNext = turns.turn('org_a');
    end();
    end();
    const endNext = await next;
    let afterNextStarted = false;
    void afterNext.then(() => (afterNextStarted = true));
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(afterNextStarted).toBe(false);
    endNext();
    (await afterNext)();
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(turns.size).toBe(0);
  });
});
