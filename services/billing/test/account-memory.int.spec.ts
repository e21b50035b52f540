import v8 from 'node:v8';
import vm from 'node:vm';
import { sortableIds } from '@oc/contracts';
import { describe, expect, it } from 'vitest';
import { accountDecider, type AccountEvent, REPEAT_WINDOW_SECONDS } from '../src/domain/account';

/**
 * What an account's memory of settled reservations costs, measured in V8's heap after full collections: the
 * bound that keeps a busy account (2,000 completions a second is 720,000 settled within the window) well inside
 * the service's heap. Measured at 26–27 bytes a reservation (chat's `chatcmpl_` ids); the Map it replaced took 357 here.
 */
const BYTES_PER_SETTLED = 40;

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;
const heapAfterGc = () => {
  gc();
  gc();
  return v8.getHeapStatistics().used_heap_size;
};

describe('account memory', () => {
  it(`holds a settled reservation in at most ${BYTES_PER_SETTLED} bytes`, () => {
    const org_id = 'org_busy';
    const start = 1_800_000_000;
    const open: AccountEvent[] = [
      { type: 'OrganizationCreated', data: { org_id, name: 'Busy', tier: 'enterprise', created: start } },
      { type: 'CreditsAdded', data: { org_id, amount_micros: 1_000_000_000_000, description: 'Top-up' } },
    ];
    let state = open.reduce(accountDecider.evolve, accountDecider.initialState());
    const before = heapAfterGc();
    // 2,000 chat completions a second for 100 s, each reserved and captured as billing records them: all
    // within the window, so none is forgotten yet.
    const rate = 2_000;
    const seconds = 100;
    expect(seconds).toBeLessThan(REPEAT_WINDOW_SECONDS);
    for (let second = 0; second < seconds; second++) {
      const now = start + second;
      for (let i = 0; i < rate; i++) {
        const reservation_id = sortableIds.next('chatcmpl_');
        state = accountDecider.evolve(state, {
          type: 'FundsReserved',
          data: { org_id, reservation_id, amount_micros: 4_000, description: 'Chat completion', expires_at: now + 660, reserved_at: now, holder: 'chat/host/run_1' },
        });
        state = accountDecider.evolve(state, {
          type: 'ReservationCaptured',
          data: { org_id, reservation_id, amount_micros: 2_000, released_micros: 2_000, settled_at: now },
        });
      }
    }
    const grown = heapAfterGc() - before;
    if (state.status !== 'open') throw new Error('expected an open account');
    expect(state.settled.size).toBe(rate * seconds);
    expect(state.reservations.size).toBe(0);
    const perSettled = grown / state.settled.size;
    expect(perSettled).toBeLessThanOrEqual(BYTES_PER_SETTLED);
  });
});
