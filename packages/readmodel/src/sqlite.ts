import type Database from 'better-sqlite3';
import { openRebuildable, startWorker } from '@oc/eventstore';
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
import { checkPath, type Condition, parseFilter, parseOptions, type Scalar, UnsupportedQueryError } from './query';
import { createWriter, openDatabase, type TableCommit } from './readmodel-writer.mjs';

export interface SqliteReadModelOptions {
  /** A file path, or `:memory:` (unit tests). */
  filename: string;
  /**
   * Check every new query's plan (`EXPLAIN QUERY PLAN`) and refuse one that would scan a whole collection
   * or sort outside an index. On in tests (`OC_ASSERT_INDEXED_QUERIES=1`), so an unindexed query fails them.
   */
  assertIndexed?: boolean;
  /**
   * Where projection commits are written: a worker thread of its own (the default for a file), this thread
   * (the default for `:memory:`, and a projection thread's own stores), or nowhere (`none`: queries only,
   * the file being written by this process's projection thread).
   */
  writes?: 'worker' | 'this-thread' | 'none';
  /**
   * Told in one line when the file was corrupt at open (not a database, or failing SQLite's quick check): it is
   * then moved aside and made anew, and the projections, their checkpoints gone with it, rebuild it from the
   * event log. On stderr unless given.
   */
  onRebuilt?: (message: string) => void;
}

export class UnindexedQueryError extends Error {
  constructor(
    readonly sql: string,
    readonly plan: string[],
  ) {
    super(`Read-model query not served by an index:\n  ${sql}\n  plan: ${plan.join(' | ')}`);
    this.name = 'UnindexedQueryError';
  }
}

const NAME = /^[a-z][a-z0-9_]*$/;
const table = (collection: string) => `rm_${collection}`;

/** The SQL expression of a field; the same text in queries and indexes, so that SQLite matches them. */
const field = (path: string) => (path === '_id' ? '_id' : `json_extract(doc, '$.${path}')`);

/** better-sqlite3 binds no booleans; JSON booleans read back through json_extract as 1 and 0. */
const bind = (value: Scalar): string | number | null => (typeof value === 'boolean' ? Number(value) : value);

function conditionSql(c: Condition, params: unknown[]): string {
  const expr = field(c.path);
  switch (c.op) {
    case '$eq':
      if (c.value === null) return `${expr} IS NULL`;
      params.push(bind(c.value));
      return `${expr} = ?`;
    case '$ne':
      if (c.value === null) return `${expr} IS NOT NULL`;
      params.push(bind(c.value));
      return `${expr} IS NOT ?`;
    case '$in':
    case '$nin': {
      // One placeholder per value: a json_each() list would be a subquery built at every execution.
      const values = c.value.filter((v) => v !== null).map(bind);
      const withNull = values.length < c.value.length;
      params.push(...values);
      const list = `(${values.map(() => '?').join(', ')})`;
      if (c.op === '$in') {
        if (values.length === 0) return withNull ? `${expr} IS NULL` : '0';
        return withNull ? `(${expr} IN ${list} OR ${expr} IS NULL)` : `${expr} IN ${list}`;
      }
      if (values.length === 0) return withNull ? `${expr} IS NOT NULL` : '1';
      return withNull ? `(${expr} IS NOT NULL AND ${expr} NOT IN ${list})` : `(${expr} IS NULL OR ${expr} NOT IN ${list})`;
    }
    case '$lt':
    case '$lte':
    case '$gt':
    case '$gte':
      params.push(c.value);
      return `${expr} ${{ $lt: '<', $lte: '<=', $gt: '>', $gte: '>=' }[c.op]} ?`;
    case '$elemMatch':
      params.push(bind(c.value));
      return `EXISTS (SELECT 1 FROM json_each(doc, '$.${c.path}') WHERE value ${c.value === null ? 'IS' : '='} ?)`;
  }
}

/**
 * Read models in SQLite: a table per collection (`_id`, the position of the last event applied, the JSON
 * document) with an expression index per declared field list. A projection's batch of writes and its
 * checkpoint commit in one transaction, in a worker thread for a file (`readmodel-writer.mjs`); queries
 * read this thread's connection, which sees each commit once it is made.
 */
export class SqliteReadModelStore implements ReadModelStore {
  /** This thread's connection: queries, declarations, and (for `:memory:`) writes. */
  readonly db: Database.Database;
  private readonly assertIndexed: boolean;
  private readonly statements = new Map<string, Database.Statement>();
  private readonly checkedPlans: Array<{ sql: string; plan: string[] }> = [];
  private readonly declared = new Set<string>();
  private readonly writer: { commit(commit: TableCommit): Promise<void>; close(): Promise<void> };

  constructor(options: SqliteReadModelOptions) {
    this.assertIndexed = options.assertIndexed ?? process.env.OC_ASSERT_INDEXED_QUERIES === '1';
    this.db = openRebuildable(options.filename, openDatabase, options.onRebuilt ?? ((message) => process.stderr.write(`${message}\n`)));
    const writes = options.writes ?? (options.filename === ':memory:' ? 'this-thread' : 'worker');
    if (writes === 'none') {
      this.writer = {
        commit: () => Promise.reject(new Error('These read models are written by another thread')),
        close: async () => {},
      };
    } else if (writes === 'this-thread') {
      const writer = createWriter(this.db);
      this.writer = { commit: async (commit) => writer.commit(commit), close: async () => {} };
    } else {
      const worker = startWorker(
        new URL('./readmodel-writer.mjs', import.meta.url),
        { role: 'oc-sqlite-readmodel-writer', filename: options.filename },
        'read-model writer',
      );
      this.writer = { commit: (commit) => worker.call<void>({ commit }), close: () => worker.close() };
    }
  }

  async declare(collections: readonly CollectionSpec[]): Promise<void> {
    for (const spec of collections) {
      if (!NAME.test(spec.name)) throw new UnsupportedQueryError(`collection name '${spec.name}'`);
      const name = table(spec.name);
      this.db.exec(
        `CREATE TABLE IF NOT EXISTS ${name} (_id TEXT PRIMARY KEY NOT NULL, _position INTEGER NOT NULL, doc TEXT NOT NULL)`,
      );
      const wanted = new Map<string, readonly string[]>(
        spec.indexes.map((fields) => [`ix_${spec.name}__${fields.join('__').replaceAll('.', '_')}`, fields]),
      );
      const existing = this.db
        .prepare<[string], string>(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND name LIKE 'ix_%'`)
        .pluck()
        .all(name);
      for (const index of existing) if (!wanted.has(index)) this.db.exec(`DROP INDEX ${index}`);
      for (const [index, fields] of wanted) {
        const columns = [...fields.map((f) => field(checkPath(f))), '_id'];
        this.db.exec(`CREATE INDEX IF NOT EXISTS ${index} ON ${name} (${columns.join(', ')})`);
      }
      this.declared.add(spec.name);
    }
  }

  collection<T extends Document>(name: string): Collection<T> {
    const select = (filter: Filter, options: FindOptions = {}) => {
      const { sort, after, limit } = parseOptions(options);
      const params: unknown[] = [];
      const where = parseFilter(filter).map((c) => conditionSql(c, params));
      if (after !== undefined) {
        // One row-value comparison when every key runs the same way, which SQLite serves from the index.
        const ascending = sort.every((k) => k.direction === 1);
        if (ascending || sort.every((k) => k.direction === -1)) {
          where.push(`(${sort.map((k) => field(k.path)).join(', ')}) ${ascending ? '>' : '<'} (${sort.map(() => '?').join(', ')})`);
          params.push(...after);
        } else {
          where.push(`(${keysetOr(sort, after, params)})`);
        }
      }
      let sql = `SELECT doc FROM ${this.tableOf(name)}`;
      if (where.length > 0) sql += ` WHERE ${where.join(' AND ')}`;
      if (sort.length > 0) sql += ` ORDER BY ${sort.map((k) => `${field(k.path)} ${k.direction === 1 ? 'ASC' : 'DESC'}`).join(', ')}`;
      // A literal: a bound LIMIT makes SQLite's lookup of a single row more than twice as slow (measured).
      if (limit > 0) sql += ` LIMIT ${limit}`;
      return { sql, params };
    };
    return {
      findOne: async (filter) => {
        const { sql, params } = select(filter, { limit: 1 });
        const row = this.query(sql).get(...params) as { doc: string } | undefined;
        return row ? (JSON.parse(row.doc) as T) : null;
      },
      find: async (filter, options) => {
        const { sql, params } = select(filter, options);
        return (this.query(sql).all(...params) as Array<{ doc: string }>).map((row) => JSON.parse(row.doc) as T);
      },
      count: async (filter) => {
        const params: unknown[] = [];
        const where = parseFilter(filter).map((c) => conditionSql(c, params));
        const sql = `SELECT COUNT(*) AS n FROM ${this.tableOf(name)}${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''}`;
        return (this.query(sql).get(...params) as { n: number }).n;
      },
    };
  }

  async loadCheckpoint(projection: string): Promise<number | undefined> {
    const row = this.statement('SELECT position FROM _checkpoints WHERE name = ?').get(projection) as { position: number } | undefined;
    return row?.position;
  }

  async loadDocument(collection: string, id: string): Promise<StoredDocument | null> {
    const row = this.statement(`SELECT doc, _position FROM ${this.tableOf(collection)} WHERE _id = ?`).get(id) as
      | { doc: string; _position: number }
      | undefined;
    return row ? { json: row.doc, position: row._position } : null;
  }

  commit({ writes, checkpoints }: ProjectionCommit): Promise<void> {
    try {
      return this.writer.commit({ writes: writes.map((w) => ({ ...w, table: this.tableOf(w.collection) })), checkpoints });
    } catch (error) {
      return Promise.reject(error);
    }
  }

  async ping(): Promise<void> {
    this.statement('SELECT 1').get();
  }

  async close(): Promise<void> {
    await this.writer.close();
    this.db.close();
  }

  private tableOf(collection: string): string {
    if (!this.declared.has(collection)) throw new UnsupportedQueryError(`collection '${collection}' was not declared`);
    return table(collection);
  }

  private statement(sql: string): Database.Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  /** Every read statement prepared so far, with its query plan. */
  get plans(): ReadonlyArray<{ sql: string; plan: string[] }> {
    return this.checkedPlans;
  }

  /** A read statement; its plan is looked at once, when it is first prepared. */
  private query(sql: string): Database.Statement {
    if (!this.statements.has(sql)) {
      const plan = (this.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...placeholders(sql)) as Array<{ detail: string }>).map(
        (row) => row.detail,
      );
      if (this.assertIndexed && !servedByIndex(plan, / LIMIT \d+$/.test(sql))) throw new UnindexedQueryError(sql, plan);
      this.checkedPlans.push({ sql, plan });
    }
    return this.statement(sql);
  }
}

/** `(a > x) OR (a = x AND b > y) …` for sort keys running different ways. */
function keysetOr(sort: Array<{ path: string; direction: 1 | -1 }>, after: readonly unknown[], params: unknown[]): string {
  return sort
    .map((key, i) => {
      const terms: string[] = [];
      for (let j = 0; j < i; j++) {
        terms.push(`${field(sort[j]!.path)} = ?`);
        params.push(after[j]);
      }
      terms.push(`${field(key.path)} ${key.direction === 1 ? '>' : '<'} ?`);
      params.push(after[i]);
      return `(${terms.join(' AND ')})`;
    })
    .join(' OR ');
}

/** EXPLAIN needs a value for every parameter; the plan does not depend on them. */
const placeholders = (sql: string) => Array.from({ length: sql.split('?').length - 1 }, () => null);

/**
 * A collection is read through an index range (`SEARCH`), or walked in index order only under a LIMIT
 * (a page); a plain `SCAN` of a collection, or a sort in a temporary tree, grows with the collection.
 */
export function servedByIndex(plan: string[], limited: boolean): boolean {
  return plan.every((step) => {
    if (/TEMP B-TREE FOR (RIGHT PART OF )?ORDER BY/.test(step)) return false;
    const scan = /^SCAN (rm_\w+)(.*)$/.exec(step);
    if (!scan) return true;
    return limited && / USING (COVERING )?INDEX /.test(scan[2]!);
  });
}
