import { MongoClient, type Db, type Filter as MongoFilter } from 'mongodb';
import type { Collection, Document, Filter, FindOptions, ReadModelStore } from './port';

interface Checkpoint {
  _id: string;
  position: number;
}

/** The production adapter; exercised by the contract suite whenever MONGO_URL is set. */
export class MongoReadModelStore implements ReadModelStore {
  private constructor(
    private readonly client: MongoClient,
    private readonly db: Db,
  ) {}

  static async connect(url: string, dbName: string): Promise<MongoReadModelStore> {
    const client = await new MongoClient(url).connect();
    return new MongoReadModelStore(client, client.db(dbName));
  }

  collection<T extends Document>(name: string): Collection<T> {
    const collection = this.db.collection<T>(name);
    return {
      findOne: async (filter) => (await collection.findOne(filter as MongoFilter<T>)) as T | null,
      find: async (filter: Filter, { sort, skip, limit }: FindOptions = {}) =>
        (await collection.find(filter as MongoFilter<T>, { sort, skip, limit }).toArray()) as T[],
      count: (filter) => collection.countDocuments(filter as MongoFilter<T>),
      upsert: async (document) => {
        await collection.replaceOne({ _id: document._id } as MongoFilter<T>, document, { upsert: true });
      },
      deleteOne: async (id) => {
        await collection.deleteOne({ _id: id } as MongoFilter<T>);
      },
    };
  }

  async loadCheckpoint(projection: string): Promise<number | undefined> {
    const checkpoint = await this.db.collection<Checkpoint>('_checkpoints').findOne({ _id: projection });
    return checkpoint?.position;
  }

  async storeCheckpoint(projection: string, position: number): Promise<void> {
    await this.db
      .collection<Checkpoint>('_checkpoints')
      .updateOne({ _id: projection }, { $set: { position } }, { upsert: true });
  }

  async ping(): Promise<void> {
    await this.db.command({ ping: 1 });
  }

  async close(): Promise<void> {
    await this.client.close();
  }
}
