import { describe } from 'vitest';
import { MongoReadModelStore } from '../src/mongodb';
import { readModelContract } from './contract';

// MongoDB cannot run on the development machine; the suite runs wherever MONGO_URL points at a server.
describe.skipIf(!process.env.MONGO_URL)('mongodb', () => {
  readModelContract('mongodb', async () => {
    const store = await MongoReadModelStore.connect(process.env.MONGO_URL!, 'oc_readmodel_contract');
    return { store, close: () => store.close() };
  });
});
