import { describe } from 'vitest';
import { openKurrentStores } from '../src/kurrentdb';
import { eventStoreContract } from './contract';

// EventStoreDB/KurrentDB cannot run on this machine; set EVENTSTORE_URL (e.g. kurrentdb://localhost:2113?tls=false) to run.
describe.skipIf(!process.env.EVENTSTORE_URL)('kurrentdb', () => {
  eventStoreContract('kurrentdb', async () => openKurrentStores(process.env.EVENTSTORE_URL!));
});
