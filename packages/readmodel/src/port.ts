/**
 * Read models: documents queried with MongoDB's filter syntax. The in-memory adapter (mingo) is the
 * embedded default; the MongoDB adapter is the production one. Both pass `test/contract.ts`.
 */

export interface Document {
  _id: string;
  [key: string]: unknown;
}

/** A MongoDB query filter (`{org_id: 'org_1', created: {$lt: 5}}`). */
export type Filter = Record<string, unknown>;

export interface FindOptions {
  /** `{created: -1, _id: -1}`; keys are applied in insertion order. */
  sort?: Record<string, 1 | -1>;
  limit?: number;
  skip?: number;
}

export interface Collection<T extends Document = Document> {
  findOne(filter: Filter): Promise<T | null>;
  find(filter: Filter, options?: FindOptions): Promise<T[]>;
  count(filter: Filter): Promise<number>;
  /** Inserts or replaces the whole document with this `_id`. */
  upsert(document: T): Promise<void>;
  deleteOne(id: string): Promise<void>;
}

export interface ReadModelStore {
  collection<T extends Document>(name: string): Collection<T>;
  /** Checkpoints of the projections writing into this store. */
  loadCheckpoint(projection: string): Promise<number | undefined>;
  storeCheckpoint(projection: string, position: number): Promise<void>;
  ping(): Promise<void>;
  close(): Promise<void>;
}
