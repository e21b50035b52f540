/**
 * `npx -y pnpm@9.15.9 exec tsx bench/account-snapshot.ts [--rate 2000]`: one account's state after `rate` chat
 * completions a second for the settled window and its minute (each reserved and captured as billing records
 * them), and the memory each settled reservation takes; then what its snapshots cost on the deciding thread, as
 * the command handler takes them (every 10,000 events): the first, which writes all its text, then five more
 * 10,000 events apart (medians): the codec's encode, the store's save (JSON and the SQLite write), and a load
 * with its decode. See docs/decisions.md, "Memory under sustained load".
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import v8 from 'node:v8';
import vm from 'node:vm';
import { sortableIds } from '@oc/contracts';
import { SqliteSnapshotStore } from '@oc/eventstore';
import { accountDecider, type AccountState, REPEAT_WINDOW_SECONDS } from '../services/billing/src/domain/account';
import { median } from './stats';

const { values } = parseArgs({ options: { rate: { type: 'string', default: '2000' } } });
const rate = Number(values.rate);
if (!Number.isInteger(rate) || rate < 1) throw new Error('--rate takes a whole number of completions a second');

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;
const memory = () => {
  gc();
  gc();
  const { used_heap_size, external_memory } = v8.getHeapStatistics() as v8.HeapInfo & { external_memory: number };
  return used_heap_size + external_memory;
};
const timed = (work: () => void) => {
  const started = performance.now();
  work();
  return performance.now() - started;
};

const org_id = 'org_busy';
const start = 1_800_000_000;
let state: AccountState = accountDecider.initialState();
state = accountDecider.evolve(state, { type: 'OrganizationCreated', data: { org_id, name: 'Busy', tier: 'enterprise', created: start } });
state = accountDecider.evolve(state, { type: 'CreditsAdded', data: { org_id, amount_micros: 1_000_000_000_000, description: 'Top-up' } });
let completed = 0;
/** One more completion, at `rate` a second from `start`: a reservation and its capture. */
const complete = () => {
  const now = start + Math.floor(completed++ / rate);
  const reservation_id = sortableIds.next('chatcmpl_');
  state = accountDecider.evolve(state, {
    type: 'FundsReserved',
    data: { org_id, reservation_id, amount_micros: 4_000, description: 'Chat completion', expires_at: now + 660, reserved_at: now, holder: 'chat/host/run_1' },
  });
  state = accountDecider.evolve(state, {
    type: 'ReservationCaptured',
    data: { org_id, reservation_id, amount_micros: 2_000, released_micros: 2_000, settled_at: now },
  });
};
const before = memory();
while (completed < rate * (REPEAT_WINDOW_SECONDS + 60)) complete();
if (state.status !== 'open') throw new Error('expected an open account');
const held = state.settled.size;
const bytesEach = (memory() - before) / held;

const dir = await mkdtemp(join(tmpdir(), 'oc-account-snapshot-'));
const store = new SqliteSnapshotStore(join(dir, 'snapshots.sqlite'), (error) => {
  throw error;
});
const { snapshot } = accountDecider;
let revision = 0;
const take = () => {
  revision += snapshot.every;
  let encoded: unknown;
  const encode = timed(() => (encoded = snapshot.encode(state)));
  const save = timed(() => store.save('account-org_busy', { revision, eventId: `e${revision}`, version: snapshot.version, state: encoded }));
  return { encode, save };
};
const first = take();
const rounds = Array.from({ length: 5 }, () => {
  // The 10,000 events before the next snapshot: 5,000 completions.
  for (let i = 0; i < snapshot.every / 2; i++) complete();
  return take();
});
const load = Array.from({ length: 5 }, () => timed(() => snapshot.decode(store.load('account-org_busy')!.state)));
const bytes = JSON.stringify(snapshot.encode(state)).length;
store.close();
await rm(dir, { recursive: true, force: true });

console.log(`${rate.toLocaleString('en')} completions a second on one account: ${held.toLocaleString('en')} settled reservations held, ${bytesEach.toFixed(1)} bytes each.`);
console.log(`State of ${(bytes / 2 ** 20).toFixed(1)} MB as JSON. First snapshot: encode ${first.encode.toFixed(2)} ms, save ${first.save.toFixed(1)} ms (all its text).`);
console.log(
  `Every 10,000 events after it: encode ${median(rounds.map((r) => r.encode)).toFixed(2)} ms, save (JSON and SQLite) ${median(rounds.map((r) => r.save)).toFixed(1)} ms; load and decode ${median(load).toFixed(0)} ms (medians of five).`,
);
