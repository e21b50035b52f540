import v8 from 'node:v8';
import vm from 'node:vm';
import { sortableIds } from '@oc/contracts';
import { describe, expect, it } from 'vitest';
import { accountDecider, type AccountEvent, type AccountState, REPEAT_WINDOW_SECONDS } from '../src/domain/account';

/**
 * What the accounts' memory of settled reservations costs, measured after full collections as V8's heap and the
 * memory outside it that it accounts for (typed arrays' buffers): the bound that keeps 2,000 completions a second
 * (720,000 settled within the window) well inside the service's heap. Measured at 32–34 bytes a reservation with
 * chat's `chatcmpl_` ids on one account, 37–39 spread over 500 (a table and a buffer per account and minute); the
 * Map it replaced took 357 here.
 */
const BYTES_PER_SETTLED = 48;

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;
const memoryAfterGc = () => {
  gc();
  gc();
  const { used_heap_size, external_memory } = v8.getHeapStatistics() as v8.HeapInfo & { external_memory: number };
  return used_heap_size + external_memory;
};

const START = 1_800_000_000;
const RATE = 2_000;
/** All within the window: none is forgotten yet. */
const SECONDS = 100;

/**
 * 2,000 chat completions a second for 100 s, over `organizations` accounts in turn, each reserved and captured
 * as billing records them; the heap they grew by for each settled reservation.
 */
function bytesPerSettled(organizations: number): number {
  const states = Array.from({ length: organizations }, (_, n) => {
    const org_id = `org_${n}`;
    const open: AccountEvent[] = [
      { type: 'OrganizationCreated', data: { org_id, name: 'Busy', tier: 'enterprise', created: START } },
      { type: 'CreditsAdded', data: { org_id, amount_micros: 1_000_000_000_000, description: 'Top-up' } },
    ];
    return open.reduce(accountDecider.evolve, accountDecider.initialState());
  });
  const before = memoryAfterGc();
  for (let second = 0; second < SECONDS; second++) {
    const now = START + second;
    for (let i = 0; i < RATE; i++) {
      const n = i % organizations;
      const org_id = `org_${n}`;
      const reservation_id = sortableIds.next('chatcmpl_');
      let state: AccountState = accountDecider.evolve(states[n]!, {
        type: 'FundsReserved',
        data: { org_id, reservation_id, amount_micros: 4_000, description: 'Chat completion', expires_at: now + 660, reserved_at: now, holder: 'chat/host/run_1' },
      });
      state = accountDecider.evolve(state, {
        type: 'ReservationCaptured',
        data: { org_id, reservation_id, amount_micros: 2_000, released_micros: 2_000, settled_at: now },
      });
      states[n] = state;
    }
  }
  const grown = memoryAfterGc() - before;
  let settled = 0;
  for (const state of states) {
    if (state.status !== 'open') throw new Error('expected an open account');
    expect(state.reservations.size).toBe(0);
    settled += state.settled.size;
  }
  expect(settled).toBe(RATE * SECONDS);
  return grown / settled;
}

describe('account memory', () => {
  expect(SECONDS).toBeLessThan(REPEAT_WINDOW_SECONDS);

  it(`holds a settled reservation in at most ${BYTES_PER_SETTLED} bytes on one busy account`, () => {
    expect(bytesPerSettled(1)).toBeLessThanOrEqual(BYTES_PER_SETTLED);
  });

  it(`holds a settled reservation in at most ${BYTES_PER_SETTLED} bytes over 500 accounts`, () => {
    expect(bytesPerSettled(500)).toBeLessThanOrEqual(BYTES_PER_SETTLED);
  });
});
