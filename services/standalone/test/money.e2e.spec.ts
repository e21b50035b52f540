import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpReceiver, type Receiver } from '../../webhook/test/support';
import { clientFor } from './client';
import { distributed, type RunningService, type Starter, standaloneProcess } from './harness';
import { moneyBooks } from './money';
import { natsReachable } from './nats';

type Books = ReturnType<typeof moneyBooks>;

/**
 * The money suite: a thousand mixed requests at once against one small balance (video creates, chats,
 * streams cut mid-way, deletes of running jobs), with and without processes killed (SIGKILL) in the middle.
 * Afterwards the ledger must add up to the balance, every reservation be settled exactly once, every
 * charge match a usage, every failure and cancellation be refunded, the balance never have gone below
 * zero, every job be final and every webhook event be delivered at least once.
 */

const modes: [string, Starter, string[]][] = [
  ['standalone process', standaloneProcess, ['standalone']],
  ...((await natsReachable()) ? [['distributed over NATS', distributed, ['billing', 'chat', 'video', 'webhook']] as [string, Starter, string[]]] : []),
];

describe.each(modes)('money and crashes (%s)', (_mode, start, processes) => {
  let service: RunningService;
  let api: ReturnType<typeof clientFor>;
  let receiver: Receiver;
  let customer: Books['customer'];
  let mixedLoad: Books['mixedLoad'];
  let watchBalance: Books['watchBalance'];
  let expectBooksBalance: Books['expectBooksBalance'];

  beforeAll(async () => {
    receiver = await httpReceiver();
    service = await start({
      SIM_VIDEO_DURATION_MS: '1500',
      CHAT_SIMULATOR_WORD_DELAY_MS: '2',
      WEBHOOK_MODE: 'development',
      WEBHOOK_ALLOW_PRIVATE: '1',
      WEBHOOK_RETRY_DELAYS_MS: '0,200,500,1000',
    });
    api = clientFor(service);
    ({ customer, mixedLoad, watchBalance, expectBooksBalance } = moneyBooks(service, api, receiver));
  });
  afterAll(async () => {
    await service?.stop();
    await receiver?.close();
  });

  it('keeps the books exact over 1,000 mixed concurrent requests against a small balance', async () => {
    const c = await customer();
    const watch = watchBalance(c.orgId);
    const load = await mixedLoad(c.key, 1_000, 200);
    const seen = await watch.stop();
    expect(Math.min(...seen.map((s) => s.available))).toBeGreaterThanOrEqual(0);
    // The balance was tight: some requests were refused for funds, and some of each kind went through.
    expect(load.statuses[402]).toBeGreaterThan(0);
    expect(load.videos.size).toBeGreaterThan(0);
    expect(load.chats.size).toBeGreaterThan(0);
    await expectBooksBalance(c, load);
  });

  it(`keeps the books exact when ${processes.join(', ')} ${processes.length > 1 ? 'are each' : 'is'} killed (SIGKILL) mid-load`, async () => {
    const c = await customer();
    const watch = watchBalance(c.orgId);
    const crashes = async () => {
      for (const name of processes) await service.crash!(name);
    };
    const load = await mixedLoad(c.key, processes.length > 1 ? 400 : 1_000, 100, crashes);
    const seen = await watch.stop();
    expect(Math.min(...seen.map((s) => s.available))).toBeGreaterThanOrEqual(0);
    await expectBooksBalance(c, load);
  });
});
