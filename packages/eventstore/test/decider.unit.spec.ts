import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { toApiError } from '@oc/contracts';
import { inSpan } from '@oc/telemetry';
import { registerTestTracing } from '@oc/telemetry/testing';
import { aggregateStream, causedBy, CommandHandler, KeyedMutex, type Decider } from '../src/decider';
import { WrongExpectedRevisionError, type EventStore } from '../src/port';
import { jsonSnapshots, SqliteSnapshotStore } from '../src/snapshots';
import { SqliteEventStore } from '../src/sqlite';

type CounterCommand = { type: 'Increment'; max: number } | { type: 'SetTo'; value: number };
type CounterEvent = { type: 'Incremented'; data: { by: number } } | { type: 'Set'; data: { value: number } };
type CounterState = { value: number };

class LimitReached extends Error {}

const counter: Decider<CounterState, CounterCommand, CounterEvent> = {
  initialState: () => ({ value: 0 }),
  decide(command, state) {
    switch (command.type) {
      case 'Increment':
        if (state.value >= command.max) throw new LimitReached();
        return [{ type: 'Incremented', data: { by: 1 } }];
      case 'SetTo':
        return state.value === command.value ? [] : [{ type: 'Set', data: { value: command.value } }];
      default: {
        const unknown: never = command;
        throw new Error(`Unknown command ${JSON.stringify(unknown)}`);
      }
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'Incremented':
        return { value: state.value + event.data.by };
      case 'Set':
        return { value: event.data.value };
    }
  },
};

const dir = mkdtempSync(join(tmpdir(), 'oc-decider-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('CommandHandler', () => {
  let store: SqliteEventStore;
  beforeEach(() => {
    store = new SqliteEventStore({ filename: ':memory:' });
  });
  afterEach(() => store.close());

  it('runs concurrent commands on one stream one at a time, so a limit holds exactly', async () => {
    const handler = new CommandHandler(store);

    const results = await Promise.allSettled(
      Array.from({ length: 50 }, () => handler.handle('counter-1', counter, { type: 'Increment', max: 30 })),
    );

    const succeeded = results.filter((r) => r.status === 'fulfilled');
    const failed = results.filter((r) => r.status === 'rejected');
    expect(succeeded).toHaveLength(30);
    expect(failed).toHaveLength(20);
    for (const r of failed) expect(r.reason).toBeInstanceOf(LimitReached);
    expect(await store.readStream('counter-1')).toHaveLength(30);
    expect((await aggregateStream(store, 'counter-1', counter)).state).toEqual({ value: 30 });
  });

  it('commits a burst of commands on one stream in a few appends, each answered with the state after its own events', async () => {
    const handler = new CommandHandler(store);
    const appendToStream = vi.spyOn(store, 'appendToStream');

    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        handler.handle('counter-1', counter, { type: 'Increment', max: 100 }, { correlationId: `corr-${i}` }),
      ),
    );

    expect(appendToStream.mock.calls.length).toBeLessThanOrEqual(2);
    expect(results.map((r) => r.state.value)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    const stored = await store.readStream('counter-1');
    expect(stored.map((e) => e.metadata?.correlationId)).toEqual(results.map((_, i) => `corr-${i}`));
  });

  it('fails only the commands of a burst whose own decision throws', async () => {
    const handler = new CommandHandler(store);
    await handler.handle('counter-1', counter, { type: 'Increment', max: 10 });

    const results = await Promise.allSettled([
      handler.handle('counter-1', counter, { type: 'Increment', max: 10 }),
      handler.handle('counter-1', counter, { type: 'Increment', max: 2 }),
      handler.handle('counter-1', counter, { type: 'Increment', max: 10 }),
    ]);

    expect(results.map((r) => (r.status === 'fulfilled' ? r.value.state.value : r.reason.constructor.name))).toEqual([
      2,
      'LimitReached',
      3,
    ]);
    expect((await aggregateStream(store, 'counter-1', counter)).state).toEqual({ value: 3 });
  });

  it('returns the new state and where the events were appended', async () => {
    const handler = new CommandHandler(store);
    await handler.handle('counter-1', counter, { type: 'Increment', max: 10 });

    const result = await handler.handle('counter-1', counter, { type: 'Increment', max: 10 });

    const [, last] = await store.readStream('counter-1');
    expect(result).toEqual({
      state: { value: 2 },
      events: [{ type: 'Incremented', data: { by: 1 } }],
      appended: { nextExpectedRevision: 1, position: last!.position },
    });
  });

  describe('answering once decided', () => {
    /** `store`, whose appends wait until `open()` is called. */
    function heldAppends() {
      let open!: () => void;
      const opened = new Promise<void>((resolve) => (open = resolve));
      const appendToStream = store.appendToStream.bind(store);
      vi.spyOn(store, 'appendToStream').mockImplementation(async (...args) => (await opened, appendToStream(...args)));
      return { open };
    }
    const settledYet = async (promise: Promise<unknown>) => {
      let settled = false;
      void promise.then(
        () => (settled = true),
        () => (settled = true),
      );
      for (let i = 0; i < 20; i++) await Promise.resolve();
      return settled;
    };

    it('answers before the events are stored; the next command on the stream waits until they are', async () => {
      const handler = new CommandHandler(store);
      const appends = heldAppends();

      const early = await handler.handle('counter-1', counter, { type: 'Increment', max: 10 }, undefined, { answerWhenDecided: true });
      const next = handler.handle('counter-1', counter, { type: 'Increment', max: 10 });

      expect(early).toEqual({ state: { value: 1 }, events: [{ type: 'Incremented', data: { by: 1 } }] });
      expect(await store.readStream('counter-1')).toHaveLength(0);
      expect(await settledYet(next)).toBe(false);
      appends.open();
      expect((await next).state).toEqual({ value: 2 });
      expect(await store.readStream('counter-1')).toHaveLength(2);
    });

    it("queues its append before its caller resumes, so that the caller's next append is stored behind it", async () => {
      const handler = new CommandHandler(store);
      const order: string[] = [];
      const appendToStream = store.appendToStream.bind(store);
      vi.spyOn(store, 'appendToStream').mockImplementation((streamName, ...rest) => (order.push(`append ${streamName}`), appendToStream(streamName, ...rest)));

      await handler.handle('counter-1', counter, { type: 'Increment', max: 10 }, undefined, { answerWhenDecided: true });
      order.push('caller resumes');

      expect(order).toEqual(['append counter-1', 'caller resumes']);
    });

    it('refuses at once', async () => {
      const handler = new CommandHandler(store);
      heldAppends();

      await expect(handler.handle('counter-1', counter, { type: 'Increment', max: 0 }, undefined, { answerWhenDecided: true })).rejects.toBeInstanceOf(
        LimitReached,
      );
    });

    it('says what it is storing, so that a query waits for it, and where it was stored once it is', async () => {
      const handler = new CommandHandler(store);
      const appends = heldAppends();

      await handler.handle('counter-1', counter, { type: 'Increment', max: 10 }, undefined, { answerWhenDecided: true });
      const storing = handler.storing;

      expect(storing).toBeDefined();
      expect(handler.lastAppended).toBe(-1);
      appends.open();
      await storing;
      expect(handler.lastAppended).toBe((await store.readStream('counter-1'))[0]!.position);
      expect(handler.storing).toBeUndefined();
    });

    it('waits for the store where another process writes the stream too', async () => {
      const handler = new CommandHandler(store, { otherWriters: true });
      const appends = heldAppends();

      const answer = handler.handle('counter-1', counter, { type: 'Increment', max: 10 }, undefined, { answerWhenDecided: true });

      expect(await settledYet(answer)).toBe(false);
      appends.open();
      expect((await answer).appended).toBeDefined();
    });
  });

  it('appends nothing when the decision is empty (an idempotent repeat)', async () => {
    const handler = new CommandHandler(store);
    await handler.handle('counter-1', counter, { type: 'SetTo', value: 3 });

    const repeat = await handler.handle('counter-1', counter, { type: 'SetTo', value: 3 });

    expect(repeat).toEqual({ state: { value: 3 }, events: [] });
    expect(await store.readStream('counter-1')).toHaveLength(1);
  });

  it('reads a stream once and then decides on the state it keeps', async () => {
    const handler = new CommandHandler(store);
    const readStream = vi.spyOn(store, 'readStream');

    for (let i = 0; i < 5; i++) await handler.handle('counter-1', counter, { type: 'Increment', max: 10 });

    expect(readStream).toHaveBeenCalledTimes(1);
    expect((await aggregateStream(store, 'counter-1', counter)).state).toEqual({ value: 5 });
  });

  it('decides a command on a stream it is told is new without reading it, and still finds one that is not', async () => {
    const handler = new CommandHandler(store);
    const readStream = vi.spyOn(store, 'readStream');

    expect(await handler.handleNew('counter-new', counter, { type: 'SetTo', value: 4 })).toMatchObject({ state: { value: 4 } });
    expect(readStream).not.toHaveBeenCalled();

    await store.appendToStream('counter-old', [{ type: 'Set', data: { value: 7 } }], { expectedRevision: 'no_stream' });
    // Not new after all: the append conflicts, the stream is read, and the command decided on what it holds.
    expect(await new CommandHandler(store).handleNew('counter-old', counter, { type: 'Increment', max: 8 })).toMatchObject({
      state: { value: 8 },
    });
    expect((await store.readStream('counter-old')).map((e) => e.data)).toEqual([{ value: 7 }, { by: 1 }]);
  });

  it('stamps the given event ids and metadata on appended events', async () => {
    const handler = new CommandHandler(store, { newEventId: () => 'event-1' });
    const metadata = { correlationId: 'corr-1', causationId: 'cmd-1' };

    await handler.handle('counter-1', counter, { type: 'Increment', max: 1 }, metadata);

    expect(await store.readStream('counter-1')).toMatchObject([{ id: 'event-1', metadata }]);
  });

  it('makes a command with no cause its own: its first event id is both correlation and causation id', async () => {
    const handler = new CommandHandler(store);
    await handler.handle('counter-1', counter, { type: 'Increment', max: 5 });
    await handler.handle('counter-1', counter, { type: 'Increment', max: 5 });

    const [first, second] = await store.readStream('counter-1');
    expect(first!.metadata).toEqual({ correlationId: first!.id, causationId: first!.id });
    expect(second!.metadata).toEqual({ correlationId: second!.id, causationId: second!.id });
  });

  it("keeps each stream's first event, so work it causes later names it as its cause", async () => {
    const handler = new CommandHandler(store);
    await handler.handle('counter-1', counter, { type: 'Increment', max: 5 }, { correlationId: 'request-1', causationId: 'request-1' });
    const origin = await handler.origin('counter-1');
    expect(origin).toEqual({ id: expect.any(String), metadata: { correlationId: 'request-1', causationId: 'request-1' } });

    await handler.handle('counter-1', counter, { type: 'Increment', max: 5 }, causedBy(origin!));
    const events = await store.readStream('counter-1');
    expect(events[1]!.metadata).toEqual({ correlationId: 'request-1', causationId: events[0]!.id });
    // Another process (a handler that has not seen the stream) reads it.
    expect(await new CommandHandler(store).origin('counter-1')).toEqual(origin);
    expect(await new CommandHandler(store).origin('counter-none')).toBeUndefined();
  });

  describe('in a traced request', () => {
    let tracing: ReturnType<typeof registerTestTracing>;
    beforeEach(() => {
      tracing = registerTestTracing();
    });
    afterEach(() => tracing.shutdown());

    it('stamps the trace: traceparent, the trace id as correlation id and the span as cause, unless a cause is named', async () => {
      const handler = new CommandHandler(store);
      await inSpan('process video.create', { kind: 'server' }, async () => {
        await handler.handle('counter-1', counter, { type: 'Increment', max: 5 });
        await handler.handle('counter-1', counter, { type: 'Increment', max: 5 }, { correlationId: 'video-chain', causationId: 'evt-0' });
      });
      const [span] = tracing.spans();
      const { traceId, spanId } = span!.spanContext();
      const [first, second] = await store.readStream('counter-1');
      expect(first!.metadata).toEqual({ correlationId: traceId, causationId: spanId, traceparent: `00-${traceId}-${spanId}-01` });
      expect(second!.metadata).toEqual({ correlationId: 'video-chain', causationId: 'evt-0', traceparent: `00-${traceId}-${spanId}-01` });
    });
  });
});

describe('CommandHandler against another process on the same file', () => {
  let mine: SqliteEventStore;
  let theirs: SqliteEventStore;
  beforeEach(() => {
    const filename = join(dir, `${randomUUID()}.db`);
    mine = new SqliteEventStore({ filename });
    theirs = new SqliteEventStore({ filename });
  });
  afterEach(async () => {
    await mine.close();
    await theirs.close();
  });

  /** `mine`, except that the other process appends right after each of the first `times` reads. */
  function racedBy(times: number) {
    let reads = 0;
    const store = new Proxy(mine, {
      get(target, property) {
        if (property !== 'readStream') return Reflect.get(target, property, target);
        const readStream: EventStore['readStream'] = async (streamName, options) => {
          const events = await target.readStream(streamName, options);
          reads += 1;
          if (reads <= times) {
            await theirs.appendToStream(streamName, [{ type: 'Incremented', data: { by: 10 } }], {
              expectedRevision: events.at(-1)?.revision ?? 'no_stream',
            });
          }
          return events;
        };
        return readStream;
      },
    });
    return { store, reads: () => reads };
  }

  it('retries a conflict and succeeds on the fresh state', async () => {
    const raced = racedBy(1);
    const handler = new CommandHandler(raced.store);

    const result = await handler.handle('counter-1', counter, { type: 'Increment', max: 100 });

    expect(raced.reads()).toBe(2);
    expect(result.state).toEqual({ value: 11 });
    expect((await mine.readStream('counter-1')).map((e) => e.data)).toEqual([{ by: 10 }, { by: 1 }]);
  });

  it('decides a whole burst again on the fresh state after a conflict', async () => {
    const raced = racedBy(1);
    const handler = new CommandHandler(raced.store);

    const results = await Promise.allSettled(
      Array.from({ length: 5 }, () => handler.handle('counter-1', counter, { type: 'Increment', max: 13 })),
    );

    expect(raced.reads()).toBe(2);
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value.state.value : r.reason.constructor.name))).toEqual([
      11,
      12,
      13,
      'LimitReached',
      'LimitReached',
    ]);
    expect((await mine.readStream('counter-1')).map((e) => e.data)).toEqual([{ by: 10 }, { by: 1 }, { by: 1 }, { by: 1 }]);
  });

  it('gives up after maxAttempts with a retryable 503, never the conflict itself (a 500)', async () => {
    const raced = racedBy(Infinity);
    const handler = new CommandHandler(raced.store, { maxAttempts: 3 });

    const refused = await handler.handle('counter-1', counter, { type: 'Increment', max: 100 }).catch((error: unknown) => error);
    expect(toApiError(refused).toData()).toMatchObject({ status: 503, code: 'service_unavailable', retryAfter: 1 });
    expect(raced.reads()).toBe(3);
  });

  it('with otherWriters, checks the kept state against the store before refusing a command', async () => {
    const handler = new CommandHandler(mine, { otherWriters: true });
    for (let i = 0; i < 3; i++) await handler.handle('counter-1', counter, { type: 'Increment', max: 3 });
    // Another replica resets the counter; this handler's kept state still says 3.
    await theirs.appendToStream('counter-1', [{ type: 'Set', data: { value: 0 } }], { expectedRevision: 2 });

    const result = await handler.handle('counter-1', counter, { type: 'Increment', max: 3 });

    expect(result.state).toEqual({ value: 1 });
    // Without the option the kept state is trusted, as in one process where nobody else writes.
    const trusting = new CommandHandler(mine);
    for (let i = 0; i < 2; i++) await trusting.handle('counter-2', counter, { type: 'Increment', max: 2 });
    await theirs.appendToStream('counter-2', [{ type: 'Set', data: { value: 0 } }], { expectedRevision: 1 });
    await expect(trusting.handle('counter-2', counter, { type: 'Increment', max: 2 })).rejects.toBeInstanceOf(LimitReached);
  });

  it('with otherWriters, checks the kept state before deciding that there is nothing to do', async () => {
    const handler = new CommandHandler(mine, { otherWriters: true });
    await handler.handle('counter-1', counter, { type: 'SetTo', value: 5 });
    await theirs.appendToStream('counter-1', [{ type: 'Set', data: { value: 7 } }], { expectedRevision: 0 });

    const result = await handler.handle('counter-1', counter, { type: 'SetTo', value: 5 });

    expect(result.events).toEqual([{ type: 'Set', data: { value: 5 } }]);
    expect((await mine.readStream('counter-1')).map((e) => e.data)).toEqual([{ value: 5 }, { value: 7 }, { value: 5 }]);
  });

  it('never reuses a kept state that a batch which failed to append was evolved into (in place)', async () => {
    // Like an account's reservations: evolve changes the state it is given, for linear folds of long streams.
    type SetEvent = { type: 'Added'; data: { id: string } };
    const tally: Decider<{ ids: Set<string> }, { type: 'Add'; id: string }, SetEvent> = {
      initialState: () => ({ ids: new Set() }),
      decide: (command, state) => (state.ids.has(command.id) ? [] : [{ type: 'Added', data: { id: command.id } }]),
      evolve: (state, event) => (state.ids.add(event.data.id), state),
    };
    const handler = new CommandHandler(mine);
    await handler.handle('set-1', tally, { type: 'Add', id: 'a' });
    // Another process appends: this handler's first decision conflicts, after adding 'b' to its kept state.
    await theirs.appendToStream('set-1', [{ type: 'Added', data: { id: 'x' } }], { expectedRevision: 0 });

    const result = await handler.handle('set-1', tally, { type: 'Add', id: 'b' });

    expect(result.events).toEqual([{ type: 'Added', data: { id: 'b' } }]);
    expect((await mine.readStream('set-1')).map((e) => (e.data as { id: string }).id)).toEqual(['a', 'x', 'b']);
  });

  it('does not retry other errors', async () => {
    const raced = racedBy(0);
    const handler = new CommandHandler(raced.store);

    await expect(handler.handle('counter-1', counter, { type: 'Increment', max: 0 })).rejects.toBeInstanceOf(LimitReached);
    expect(raced.reads()).toBe(1);
  });
});

describe('CommandHandler with snapshots', () => {
  const counted: Decider<CounterState, CounterCommand, CounterEvent> = {
    ...counter,
    snapshot: jsonSnapshots<CounterState>(1, 10),
  };
  let store: SqliteEventStore;
  let snapshots: SqliteSnapshotStore;
  let file: string;
  const onError = vi.fn();
  beforeEach(() => {
    store = new SqliteEventStore({ filename: ':memory:' });
    file = join(dir, `snapshots-${randomUUID()}.sqlite`);
    onError.mockClear();
    snapshots = new SqliteSnapshotStore(file, onError);
  });
  afterEach(() => {
    store.close();
    snapshots.close();
  });
  const handler = () => ({ commands: new CommandHandler(store, { snapshots }) });
  const increment = async (commands: CommandHandler, times: number) => {
    for (let i = 0; i < times; i++) await commands.handle('counter-1', counted, { type: 'Increment', max: 1_000 });
  };

  it('loads a long stream from its latest snapshot, reading only the events after it', async () => {
    await increment(handler().commands, 25);
    const reads = vi.spyOn(store, 'readStream');
    const cold = handler().commands;
    expect(await cold.load('counter-1', counted)).toEqual({ value: 25 });
    // The event the snapshot (taken at 20 events, revision 19) names, then the five after it.
    expect(reads.mock.calls.map(([, options]) => options?.fromRevision)).toEqual([19, 20]);
    await cold.handle('counter-1', counted, { type: 'Increment', max: 26 });
    expect(await handler().commands.load('counter-1', counted)).toEqual({ value: 26 });
  });

  it('keeps no snapshot of a stream shorter than `every`', async () => {
    await increment(handler().commands, 9);
    expect(snapshots.load('counter-1')).toBeUndefined();
    await increment(handler().commands, 1);
    expect(snapshots.load('counter-1')).toMatchObject({ revision: 9, state: { value: 10 } });
  });

  it('ignores a snapshot whose event the store no longer holds at its revision (another or a reset log)', async () => {
    await increment(handler().commands, 12);
    store.close();
    store = new SqliteEventStore({ filename: ':memory:' });
    await handler().commands.handle('counter-1', counted, { type: 'SetTo', value: 3 });
    expect(await handler().commands.load('counter-1', counted)).toEqual({ value: 3 });
  });

  it('ignores a snapshot of another version of the state', async () => {
    await increment(handler().commands, 12);
    const reads = vi.spyOn(store, 'readStream');
    const next = { ...counted, snapshot: { ...counted.snapshot!, version: 2, decode: () => ({ value: -1 }) } };
    expect(await handler().commands.load('counter-1', next)).toEqual({ value: 12 });
    expect(reads.mock.calls[0]?.[1]?.fromRevision).toBe(0);
  });

  it('keeps deciding when a snapshot cannot be kept, and says so', async () => {
    const { commands } = handler();
    snapshots.close();
    await increment(commands, 12);
    expect(await commands.load('counter-1', counted)).toEqual({ value: 12 });
    expect(await handler().commands.load('counter-1', counted)).toEqual({ value: 12 });
    expect(onError).toHaveBeenCalled();
    snapshots = new SqliteSnapshotStore(file, onError);
  });
});

describe('aggregateStream', () => {
  it('folds a stream longer than a page of reads', async () => {
    const store = new SqliteEventStore({ filename: ':memory:' });
    const events = Array.from({ length: 4_500 }, () => ({ id: randomUUID(), type: 'Incremented', data: { by: 1 } }));
    await store.appendToStream('counter-long', events, { expectedRevision: 'no_stream' });
    expect(await aggregateStream(store, 'counter-long', counter)).toEqual({ state: { value: 4_500 }, revision: 4_499 });
    expect(await new CommandHandler(store).load('counter-long', counter)).toEqual({ value: 4_500 });
    store.close();
  });

  it('folds a stream into state and reports its revision, or no_stream when missing', async () => {
    const store = new SqliteEventStore({ filename: ':memory:' });
    expect(await aggregateStream(store, 'counter-1', counter)).toEqual({ state: { value: 0 }, revision: 'no_stream' });

    await store.appendToStream(
      'counter-1',
      [
        { type: 'Set', data: { value: 5 } },
        { type: 'Incremented', data: { by: 2 } },
      ],
      { expectedRevision: 'no_stream' },
    );
    expect(await aggregateStream(store, 'counter-1', counter)).toEqual({ state: { value: 7 }, revision: 1 });
    await store.close();
  });
});

describe('KeyedMutex', () => {
  it('runs work for one key in order, other keys alongside, and carries on after a failure', async () => {
    const mutex = new KeyedMutex();
    const log: string[] = [];
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));

    const first = mutex.run('a', async () => {
      log.push('a1 start');
      await released;
      log.push('a1 end');
      throw new Error('a1 failed');
    });
    const second = mutex.run('a', async () => void log.push('a2'));
    await mutex.run('b', async () => void log.push('b1'));
    expect(log).toEqual(['a1 start', 'b1']);

    release();
    await expect(first).rejects.toThrow('a1 failed');
    await second;
    expect(log).toEqual(['a1 start', 'b1', 'a1 end', 'a2']);
  });
});
