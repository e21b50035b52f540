import { find } from 'mingo';
import type { Collection, Document, Filter, FindOptions, ReadModelStore } from './port';

/**
 * The embedded default. Nothing is persisted: read models are rebuilt from the event store at every
 * start. Documents go in and come out as deep copies so that callers share no state with the store.
 */
export class MemoryReadModelStore implements ReadModelStore {
  readonly #collections = new Map<string, MemoryCollection<Document>>();
  readonly #checkpoints = new Map<string, number>();

  collection<T extends Document>(name: string): Collection<T> {
    let collection = this.#collections.get(name);
    if (!collection) {
      collection = new MemoryCollection();
      this.#collections.set(name, collection);
    }
    return collection as unknown as Collection<T>;
  }

  async loadCheckpoint(projection: string): Promise<number | undefined> {
    return this.#checkpoints.get(projection);
  }

  async storeCheckpoint(projection: string, position: number): Promise<void> {
    this.#checkpoints.set(projection, position);
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {}
}

class MemoryCollection<T extends Document> implements Collection<T> {
  readonly #documents = new Map<string, T>();

  async findOne(filter: Filter): Promise<T | null> {
    const [document] = this.#query(filter).limit(1).all();
    return document ? structuredClone(document) : null;
  }

  async find(filter: Filter, options: FindOptions = {}): Promise<T[]> {
    const cursor = this.#query(filter);
    if (options.sort) cursor.sort(options.sort);
    if (options.skip) cursor.skip(options.skip);
    // A limit of 0 means "no limit", as in MongoDB.
    if (options.limit) cursor.limit(options.limit);
    return cursor.all().map((document) => structuredClone(document));
  }

  async count(filter: Filter): Promise<number> {
    return this.#query(filter).all().length;
  }

  async upsert(document: T): Promise<void> {
    this.#documents.set(document._id, structuredClone(document));
  }

  async deleteOne(id: string): Promise<void> {
    this.#documents.delete(id);
  }

  #query(filter: Filter) {
    return find<T>([...this.#documents.values()], filter);
  }
}
