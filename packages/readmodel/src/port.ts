/**
 * Read models: JSON documents written only by projections and queried with a stated subset of MongoDB's
 * filter syntax (`query.ts`). SQLite is the embedded default (a `:memory:` database in unit tests),
 * MongoDB the production adapter; both pass `test/contract.ts`.
 */

export interface Document {
  _id: string;
  [key: string]: unknown;
}

/**
 * A filter in the stated subset: `{org_id: 'org_1', created: {$lt: 5}, events: {$elemMatch: {$eq: 'x'}}}`.
 * See `query.ts` for exactly what is accepted; anything else is refused by every adapter.
 */
export type Filter = Record<string, unknown>;

export interface FindOptions {
  /** `{created: -1, _id: -1}`; keys are applied in insertion order. */
  sort?: Record<string, 1 | -1>;
  /** At most this many documents; 0 or absent means no limit. */
  limit?: number;
  /**
   * Keyset pagination: only documents that sort strictly after one whose sort fields had these values
   * (one per `sort` key, in order, none null).
   */
  after?: readonly unknown[];
}

export interface Collection<T extends Document = Document> {
  findOne(filter: Filter): Promise<T | null>;
  find(filter: Filter, options?: FindOptions): Promise<T[]>;
  count(filter: Filter): Promise<number>;
}

/**
 * A collection and the indexes its queries need: each index is a list of fields (dot paths), to which
 * `_id` is appended so that a sort on `(field, _id)` is served by the index too.
 */
export interface CollectionSpec {
  name: string;
  indexes: ReadonlyArray<readonly string[]>;
}

/** A document as stored, with the global position of the last event applied to it. */
export interface StoredDocument {
  json: string;
  position: number;
}

/** A projection's write: the document's new JSON (null deletes it), tagged with the event's position. */
export interface DocumentWrite {
  collection: string;
  id: string;
  position: number;
  json: string | null;
}

export interface ProjectionCommit {
  writes: readonly DocumentWrite[];
  /** Projection name → position of the last event it has processed. */
  checkpoints: Readonly<Record<string, number>>;
}

export interface ReadModelStore {
  /** Creates each collection and its indexes, and drops indexes no longer declared; idempotent. */
  declare(collections: readonly CollectionSpec[]): Promise<void>;
  /** Queries; the collection must have been declared. */
  collection<T extends Document>(name: string): Collection<T>;
  loadCheckpoint(projection: string): Promise<number | undefined>;
  loadDocument(collection: string, id: string): Promise<StoredDocument | null>;
  /**
   * Applies the writes and stores the checkpoints, in one transaction where the backend has them. A write
   * is applied only when it is newer than the stored document (its position is greater), so replaying
   * events after a crash between a document write and its checkpoint changes nothing twice.
   */
  commit(commit: ProjectionCommit): Promise<void>;
  ping(): Promise<void>;
  close(): Promise<void>;
}
