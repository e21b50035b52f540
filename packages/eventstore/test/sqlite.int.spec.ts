import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '@oc/contracts';
import { WrongExpectedRevisionError, type StoredEvent } from '../src/port';
import { openSqliteStores, SqliteEventStore } from '../src/sqlite';
import { eventStoreContract } from './contract';

const dir = mkdtempSync(join(tmpdir(), 'oc-eventstore-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const newFile = () => join(dir, `${randomUUID()}.db`);
const racer = fileURLToPath(new URL('./fixtures/append-racer.ts', import.meta.url));

eventStoreContract('sqlite :memory:', async () => openSqliteStores(':memory:'));
eventStoreContract('sqlite file', async () => openSqliteStores(newFile()));

describe('sqlite event store on a file', () => {
  const open: SqliteEventStore[] = [];
  const openStore = (filename: string, options: { pollIntervalMs?: number } = {}) => {
    const store = new SqliteEventStore({ filename, ...options });
    open.push(store);
    return store;
  };
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => (s.db.open ? s.close() : undefined)));
  });

  it('uses WAL so that readers and the writer of other processes do not block each other', () => {
    expect(openStore(newFile()).db.pragma('journal_mode', { simple: true })).toBe('wal');
  });

  it('keeps events and checkpoints across closing and reopening the file', async () => {
    const filename = newFile();
    const first = openSqliteStores(filename);
    const appended = await first.store.appendToStream(
      'account-1',
      [{ type: 'Opened', data: { owner: 'ada' }, metadata: { correlationId: 'c-1' } }],
      { expectedRevision: 'no_stream' },
    );
    await first.checkpoints.store('projector', appended.position);
    const before = await first.store.readStream('account-1');
    await first.close();

    const second = openSqliteStores(filename);
    expect(await second.store.readStream('account-1')).toEqual(before);
    expect(await second.checkpoints.load('projector')).toBe(appended.position);
    const next = await second.store.appendToStream('account-1', [{ type: 'Closed', data: {} }], { expectedRevision: 0 });
    expect(next.nextExpectedRevision).toBe(1);
    expect(next.position).toBeGreaterThan(appended.position);
    await second.close();
  });

  it('stamps events with the injected clock and id source', async () => {
    const clock = new ManualClock();
    let n = 0;
    const store = new SqliteEventStore({ filename: ':memory:', clock, newId: () => `id-${++n}` });
    open.push(store);
    await store.appendToStream('s', [{ type: 'A', data: {} }], { expectedRevision: 'no_stream' });
    clock.advance(45 * 60_000);
    await store.appendToStream('s', [{ id: 'given', type: 'B', data: {} }, { type: 'C', data: {} }], { expectedRevision: 0 });

    const read = await store.readStream('s');
    expect(read.map((e) => [e.id, e.created])).toEqual([
      ['id-1', clock.now() - 45 * 60_000],
      ['given', clock.now()],
      ['id-2', clock.now()],
    ]);
  });

  it('lets only one of two stores on the same file (two processes) win an expected revision', async () => {
    const filename = newFile();
    const [a, b] = [openStore(filename), openStore(filename)];

    await a.appendToStream('video-1', [{ type: 'Created', data: {} }], { expectedRevision: 'no_stream' });
    const createdTwice = b.appendToStream('video-1', [{ type: 'Created', data: {} }], { expectedRevision: 'no_stream' });
    await expect(createdTwice).rejects.toMatchObject({ name: 'WrongExpectedRevisionError', actual: 0 });

    const results = await Promise.allSettled(
      [a, b, a, b].map((store, i) => store.appendToStream('video-1', [{ type: 'Bumped', data: { i } }], { expectedRevision: 0 })),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(WrongExpectedRevisionError);
    expect(await a.readStream('video-1')).toEqual(await b.readStream('video-1'));
    expect(await b.readStream('video-1')).toHaveLength(2);
  });

  it('keeps one gap-free revision sequence when separate OS processes race on the file', async () => {
    const filename = newFile();
    const runs = Array.from({ length: 4 }, () =>
      promisify(execFile)(process.execPath, ['--import', 'tsx', racer, filename, '25']),
    );
    await Promise.all(runs);

    const events = await openStore(filename).readStream('race');
    expect(events.map((e) => e.revision)).toEqual(Array.from({ length: 100 }, (_, i) => i));
    expect(new Set(events.map((e) => (e.data as { pid: number }).pid)).size).toBe(4);
  });

  it("delivers another process's appends to a live subscription by polling", async () => {
    const filename = newFile();
    const a = openStore(filename, { pollIntervalMs: 10 });
    const b = openStore(filename);
    const received: StoredEvent[] = [];
    const subscription = a.subscribeToAll((batch) => void received.push(...batch));

    await b.appendToStream('chat-1', [{ type: 'Asked', data: {} }], { expectedRevision: 'no_stream' });
    await vi.waitFor(() => expect(received.map((e) => e.type)).toEqual(['Asked']));
    await subscription.stop();
  });

  it("sees another process's commit at once when asked for the head, and hands it to live subscriptions without waiting for the poll", async () => {
    const filename = newFile();
    const a = openStore(filename, { pollIntervalMs: 3_600_000 });
    const b = openStore(filename, { pollIntervalMs: 3_600_000 });
    expect(await a.headPosition()).toBe(-1);
    const seen: number[] = [];
    a.subscribeToAll((events) => void seen.push(...events.map((e) => e.position)));
    const { position } = await b.appendToStream('other-1', [{ type: 'Made', data: {} }], { expectedRevision: 'no_stream' });
    expect(await a.headPosition()).toBe(position);
    await vi.waitFor(() => expect(seen).toEqual([position]), { timeout: 2_000, interval: 5 });
  });

  it("hands every event once, in order, when its own commits and another process's interleave with the poll", async () => {
    // Services sharing one file: each process's subscriptions get their own commits at once and the others'
    // by polling. A poll that runs after our commit but before its answer reaches us reads our events too;
    // they must not be handed over a second time when the answer arrives.
    const filename = newFile();
    const a = openStore(filename, { pollIntervalMs: 1 });
    const b = openStore(filename);
    const received: number[] = [];
    const subscription = a.subscribeToAll((batch) => void received.push(...batch.map((e) => e.position)));

    const writes = (store: SqliteEventStore, name: string) =>
      (async () => {
        for (let i = 0; i < 150; i++) {
          await Promise.all(
            [0, 1, 2].map((n) => store.appendToStream(`${name}-${n}`, [{ type: 'Appended', data: { i } }], { expectedRevision: 'any' })),
          );
        }
      })();
    await Promise.all([writes(a, 'a'), writes(b, 'b')]);
    const all = (await a.readAll({ maxCount: 10_000 })).map((e) => e.position);
    expect(all).toHaveLength(900);
    await vi.waitFor(() => expect(received.length).toBeGreaterThanOrEqual(all.length));
    expect(received).toEqual(all);
    await subscription.stop();
  });

  it('does not hand over its own commit twice when a poll read it before the commit was answered', async () => {
    const filename = newFile();
    const a = openStore(filename, { pollIntervalMs: 3_600_000 });
    const b = openStore(filename);
    // The poll runs right after the writer thread committed, before this thread hears back from it.
    const internals = a as unknown as { writer: { commit: (...args: unknown[]) => Promise<unknown> }; pollOthers(): void };
    const commit = internals.writer.commit.bind(internals.writer);
    internals.writer.commit = async (...args) => {
      const outcome = await commit(...args);
      internals.pollOthers();
      return outcome;
    };
    const received: number[] = [];
    // A subscriber busy with its batch (a relay waiting for NATS) while the next ones queue up.
    const subscription = a.subscribeToAll(async (batch) => {
      received.push(...batch.map((e) => e.position));
      await new Promise((r) => setTimeout(r, 5));
    });

    await b.appendToStream('b-1', [{ type: 'Appended', data: {} }], { expectedRevision: 'any' });
    await a.appendToStream('a-1', [{ type: 'Appended', data: {} }, { type: 'Appended', data: {} }], { expectedRevision: 'any' });
    await b.appendToStream('b-1', [{ type: 'Appended', data: {} }], { expectedRevision: 'any' });
    await a.appendToStream('a-1', [{ type: 'Appended', data: {} }], { expectedRevision: 'any' });
    await vi.waitFor(() => expect(received.length).toBeGreaterThanOrEqual(5));
    await new Promise((r) => setTimeout(r, 20));
    expect(received).toEqual([1, 2, 3, 4, 5]);
    await subscription.stop();
  });

  it('wakes a live subscription on an append in the same process without waiting for the poll', async () => {
    const store = openStore(':memory:', { pollIntervalMs: 3_600_000 });
    const received: StoredEvent[] = [];
    const subscription = store.subscribeToAll((batch) => void received.push(...batch));

    await store.appendToStream('chat-1', [{ type: 'Asked', data: {} }], { expectedRevision: 'no_stream' });
    await vi.waitFor(() => expect(received).toHaveLength(1));
    await subscription.stop();
  });

  describe('group commit', () => {
    /** Frames in the write-ahead log: every commit adds at least one, so fewer commits mean fewer frames. */
    const walFrames = (store: SqliteEventStore) =>
      (store.db.pragma('wal_checkpoint(PASSIVE)') as Array<{ log: number }>)[0]!.log;

    it('commits the appends of one turn of the event loop together', async () => {
      const together = openStore(newFile());
      const oneByOne = openStore(newFile());
      const append = (store: SqliteEventStore, i: number) =>
        store.appendToStream(`s-${i}`, [{ type: 'A', data: { i } }], { expectedRevision: 'no_stream' });

      const results = await Promise.all(Array.from({ length: 50 }, (_, i) => append(together, i)));
      for (let i = 0; i < 50; i++) await append(oneByOne, i);

      expect(results.map((r) => r.nextExpectedRevision)).toEqual(Array(50).fill(0));
      expect(new Set(results.map((r) => r.position)).size).toBe(50);
      expect(walFrames(together) * 10).toBeLessThan(walFrames(oneByOne));
    });

    it('checks each append of a group against its own expected revision', async () => {
      const store = openStore(':memory:');
      await store.appendToStream('taken', [{ type: 'A', data: {} }], { expectedRevision: 'no_stream' });

      const [first, second, stale, fresh] = await Promise.allSettled([
        store.appendToStream('chain', [{ type: 'A', data: {} }], { expectedRevision: 'no_stream' }),
        store.appendToStream('chain', [{ type: 'B', data: {} }], { expectedRevision: 0 }),
        store.appendToStream('taken', [{ type: 'B', data: {} }], { expectedRevision: 'no_stream' }),
        store.appendToStream('fresh', [{ type: 'A', data: {} }], { expectedRevision: 'no_stream' }),
      ]);

      expect(first).toMatchObject({ status: 'fulfilled', value: { nextExpectedRevision: 0 } });
      expect(second).toMatchObject({ status: 'fulfilled', value: { nextExpectedRevision: 1 } });
      expect(stale).toMatchObject({ status: 'rejected', reason: expect.any(WrongExpectedRevisionError) });
      expect(fresh.status).toBe('fulfilled');
      expect((await store.readStream('taken')).map((e) => e.type)).toEqual(['A']);
    });

    it('fails only the append whose data cannot be stored', async () => {
      const store = openStore(':memory:');
      const [bad, good] = await Promise.allSettled([
        store.appendToStream('bad', [{ type: 'A', data: { n: 1n } }], { expectedRevision: 'no_stream' }),
        store.appendToStream('good', [{ type: 'A', data: {} }], { expectedRevision: 'no_stream' }),
      ]);
      expect(bad.status).toBe('rejected');
      expect(good.status).toBe('fulfilled');
      expect(await store.readStream('bad')).toEqual([]);
    });

    it('fails what was queued behind a failed commit with it rather than commit it afterwards', async () => {
      const store = openStore(newFile());
      // A commit that fails as a full or failing disk would: inserting an event of type Boom aborts it.
      store.db.exec("CREATE TRIGGER boom BEFORE INSERT ON events WHEN NEW.type = 'Boom' BEGIN SELECT RAISE(ABORT, 'boom'); END");

      const failing = store.appendToStream('capture', [{ type: 'Boom', data: {} }], { expectedRevision: 'no_stream' });
      // The next turn: that append's commit is under way, so this one waits for the commit after it.
      await new Promise((resolve) => setImmediate(resolve));
      const behind = store.appendToStream('exchange', [{ type: 'A', data: {} }], { expectedRevision: 'no_stream' });

      await expect(failing).rejects.toThrow('boom');
      await expect(behind).rejects.toThrow('boom');
      expect(await store.readStream('exchange')).toEqual([]);
      await store.appendToStream('later', [{ type: 'A', data: {} }], { expectedRevision: 'no_stream' });
      expect(await store.readStream('later')).toHaveLength(1);
    });

    it('hands a live subscription what one turn appended as one batch', async () => {
      const store = openStore(':memory:', { pollIntervalMs: 3_600_000 });
      const batches: number[] = [];
      const subscription = store.subscribeToAll((batch) => void batches.push(batch.length));
      await vi.waitFor(() => expect(subscription).toBeDefined());

      await Promise.all(
        Array.from({ length: 10 }, (_, i) => store.appendToStream(`s-${i}`, [{ type: 'A', data: {} }], { expectedRevision: 'no_stream' })),
      );
      await vi.waitFor(() => expect(batches.reduce((a, b) => a + b, 0)).toBe(10));
      await subscription.stop();
      expect(batches).toEqual([10]);
    });
  });

  it('delivers everything, in order, to a subscriber that fell far behind', async () => {
    const store = openStore(':memory:', { pollIntervalMs: 3_600_000 });
    const positions: number[] = [];
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let first = true;
    const subscription = store.subscribeToAll(async (batch) => {
      if (first) {
        first = false;
        await released;
      }
      for (const e of batch) positions.push(e.position);
    });
    await store.appendToStream('first', [{ type: 'A', data: {} }], { expectedRevision: 'no_stream' });
    // More than a live subscriber may hold in memory: it has to go back to reading the file.
    for (let i = 0; i < 12; i++) {
      await store.appendToStream(`bulk-${i}`, Array.from({ length: 1_000 }, () => ({ type: 'B', data: {} })), { expectedRevision: 'no_stream' });
    }
    release();

    await vi.waitFor(() => expect(positions).toHaveLength(12_001), { timeout: 10_000 });
    await subscription.stop();
    expect(positions).toEqual(Array.from({ length: 12_001 }, (_, i) => i + 1));
  });

  it('stops its subscriptions when closed', async () => {
    const store = openStore(':memory:');
    let enter!: () => void;
    let release!: () => void;
    const entered = new Promise<void>((resolve) => (enter = resolve));
    const released = new Promise<void>((resolve) => (release = resolve));
    store.subscribeToAll(async () => {
      enter();
      await released;
    });
    await store.appendToStream('s', [{ type: 'A', data: {} }], { expectedRevision: 'no_stream' });
    await entered;

    const closing = store.close();
    release();
    await closing;
    expect(store.db.open).toBe(false);
  });
});
