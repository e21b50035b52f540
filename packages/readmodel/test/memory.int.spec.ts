import { MemoryReadModelStore } from '../src/memory';
import { readModelContract } from './contract';

readModelContract('memory', async () => {
  const store = new MemoryReadModelStore();
  return { store, close: () => store.close() };
});
