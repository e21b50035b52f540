import { type AnyBulkWriteOperation, type ClientSession, type Db, type Document as MongoDocument, MongoClient, MongoServerError } from 'mongodb';
import type {
  Collection,
  CollectionSpec,
  Document,
  Filter,
  FindOptions,
  ProjectionCommit,
  ReadModelStore,
  StoredDocument,
} from './port';
import { parseFilter, parseOptions, type SortKey } from './query';

interface StoredMongoDocument extends MongoDocument {
  _id: string;
  _position: number;
}

interface Checkpoint {
  _id: string;
  position: number;
}

const HIDE_POSITION = { projection: { _position: 0 } } as const;
const NAMESPACE_NOT_FOUND = 26;

/**
 * The production adapter; exercised by the contract suite whenever MONGO_URL is set. Every document carries
 * `_position`, the global position of the last event applied to it, and a projection's write replaces it
 * only when newer. On a replica set (or through mongos) a batch of writes and its checkpoint commit in one
 * transaction; on a standalone server they are written in order, documents first, and the positions make
 * the replay after a crash in between apply nothing twice.
 */
export class MongoReadModelStore implements ReadModelStore {
  private constructor(
    private readonly client: MongoClient,
    private readonly db: Db,
    private readonly transactions: boolean,
  ) {}

  static async connect(url: string, dbName: string): Promise<MongoReadModelStore> {
    const client = await new MongoClient(url).connect();
    const db = client.db(dbName);
    const hello = await db.admin().command({ hello: 1 });
    return new MongoReadModelStore(client, db, typeof hello.setName === 'string' || hello.msg === 'isdbgrid');
  }

  async declare(collections: readonly CollectionSpec[]): Promise<void> {
    for (const spec of collections) {
      const collection = this.db.collection<StoredMongoDocument>(spec.name);
      const wanted = new Map<string, readonly string[]>(spec.indexes.map((fields) => [`ix__${fields.join('__')}`, fields]));
      const existing = await collection
        .listIndexes()
        .toArray()
        .catch((error: unknown) => {
          if (error instanceof MongoServerError && error.code === NAMESPACE_NOT_FOUND) return [];
          throw error;
        });
      for (const { name } of existing) {
        if (typeof name === 'string' && name.startsWith('ix__') && !wanted.has(name)) await collection.dropIndex(name);
      }
      for (const [name, fields] of wanted) {
        await collection.createIndex(Object.fromEntries([...fields.map((f) => [f, 1]), ['_id', 1]]), { name });
      }
    }
  }

  collection<T extends Document>(name: string): Collection<T> {
    const collection = this.db.collection<StoredMongoDocument>(name);
    return {
      findOne: async (filter) => {
        parseFilter(filter);
        return (await collection.findOne(filter, HIDE_POSITION)) as T | null;
      },
      find: async (filter: Filter, options: FindOptions = {}) => {
        parseFilter(filter);
        const { sort, after, limit } = parseOptions(options);
        const query = after === undefined ? filter : { $and: [filter, keyset(sort, after)] };
        const cursor = collection.find(query, { ...HIDE_POSITION, sort: Object.fromEntries(sort.map((k) => [k.path, k.direction])), limit });
        return (await cursor.toArray()) as unknown as T[];
      },
      count: async (filter) => {
        parseFilter(filter);
        return collection.countDocuments(filter);
      },
    };
  }

  async loadCheckpoint(projection: string): Promise<number | undefined> {
    const checkpoint = await this.db.collection<Checkpoint>('_checkpoints').findOne({ _id: projection });
    return checkpoint?.position;
  }

  async loadDocument(collection: string, id: string): Promise<StoredDocument | null> {
    const stored = await this.db.collection<StoredMongoDocument>(collection).findOne({ _id: id });
    if (!stored) return null;
    const { _position, ...document } = stored;
    return { json: JSON.stringify(document), position: _position };
  }

  async commit(commit: ProjectionCommit): Promise<void> {
    const byCollection = new Map<string, AnyBulkWriteOperation<StoredMongoDocument>[]>();
    for (const write of commit.writes) {
      const operations = byCollection.get(write.collection) ?? [];
      byCollection.set(write.collection, operations);
      if (write.json === null) {
        operations.push({ deleteOne: { filter: { _id: write.id, _position: { $lt: write.position } } } });
        continue;
      }
      const replacement = { ...(JSON.parse(write.json) as MongoDocument), _id: write.id, _position: write.position };
      // A pipeline update, so that an older write leaves the document alone instead of failing on its key.
      operations.push({
        updateOne: {
          filter: { _id: write.id },
          update: [
            {
              $replaceWith: {
                $cond: [{ $lt: [{ $ifNull: ['$_position', -1] }, write.position] }, { $literal: replacement }, '$$ROOT'],
              },
            },
          ],
          upsert: true,
        },
      });
    }
    const checkpoints = Object.entries(commit.checkpoints).map(([name, position]) => ({
      updateOne: { filter: { _id: name }, update: { $set: { position } }, upsert: true },
    }));
    const write = async (session?: ClientSession) => {
      for (const [name, operations] of byCollection) {
        await this.db.collection<StoredMongoDocument>(name).bulkWrite(operations, { ordered: true, ...(session ? { session } : {}) });
      }
      if (checkpoints.length > 0) {
        await this.db.collection<Checkpoint>('_checkpoints').bulkWrite(checkpoints, { ordered: true, ...(session ? { session } : {}) });
      }
    };
    if (!this.transactions) return write();
    await this.client.withSession((session) => session.withTransaction(() => write(session)));
  }

  async ping(): Promise<void> {
    await this.db.command({ ping: 1 });
  }

  async close(): Promise<void> {
    await this.client.close();
  }
}

/** Documents sorting strictly after the cursor: `(a > x) OR (a = x AND b > y) …`. */
function keyset(sort: SortKey[], after: readonly unknown[]): MongoDocument {
  return {
    $or: sort.map((key, i) => ({
      ...Object.fromEntries(sort.slice(0, i).map((k, j) => [k.path, after[j]])),
      [key.path]: { [key.direction === 1 ? '$gt' : '$lt']: after[i] },
    })),
  };
}
