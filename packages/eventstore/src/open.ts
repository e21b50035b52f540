import type { Clock } from '@oc/contracts';
import { openKurrentStores } from './kurrentdb';
import { openSqliteStores } from './sqlite';

/** EventStoreDB when a connection string is configured, otherwise the durable SQLite file. */
export function openEventStores(options: { eventStoreUrl?: string | undefined; sqliteFile: string; clock?: Clock }) {
  if (options.eventStoreUrl) return openKurrentStores(options.eventStoreUrl);
  return openSqliteStores({ filename: options.sqliteFile, ...(options.clock ? { clock: options.clock } : {}) });
}
