import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  WrongExpectedRevisionError,
  type CheckpointStore,
  type EventStore,
  type StoredEvent,
  type SubscribeOptions,
} from '../src/port';

export interface OpenStores {
  store: EventStore;
  checkpoints: CheckpointStore;
  close(): Promise<void>;
}

function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

const waitFor = (assertion: () => void) => vi.waitFor(assertion, { timeout: 10_000, interval: 5 });

/** Yields to the event loop once, so that anything already able to run gets the chance to. */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

async function conflict(attempt: Promise<unknown>): Promise<WrongExpectedRevisionError> {
  const error = await attempt.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(WrongExpectedRevisionError);
  return error as WrongExpectedRevisionError;
}

/**
 * The behaviour every EventStore/CheckpointStore adapter must have. Stream and checkpoint names are unique per
 * test and reads of the global log only look at the test's own streams, so a shared server works too.
 */
export function eventStoreContract(name: string, open: () => Promise<OpenStores>) {
  describe(`event store contract: ${name}`, () => {
    let opened: OpenStores;
    let store: EventStore;

    beforeEach(async () => {
      opened = await open();
      store = opened.store;
    });
    afterEach(() => opened.close());

    const newStream = () => `contract-${randomUUID()}`;
    const event = (type: string, data: unknown = {}) => ({ type, data });
    const events = (count: number, from = 0) => Array.from({ length: count }, (_, i) => event('Counted', { n: from + i }));

    /** Appends to a fresh stream; its position marks "now" in the global log. */
    const mark = async () =>
      (await store.appendToStream(newStream(), [event('Marked')], { expectedRevision: 'no_stream' })).position;

    function subscribe(
      streams: string[],
      after: number,
      onEvent?: (event: StoredEvent) => Promise<void> | void,
      onError?: SubscribeOptions['onError'],
    ) {
      const received: StoredEvent[] = [];
      const batches: number[] = [];
      const subscription = store.subscribeToAll(
        async (batch) => {
          expect(batch.length).toBeGreaterThan(0);
          batches.push(batch.length);
          for (const e of batch) {
            if (!streams.includes(e.streamName)) continue;
            received.push(e);
            await onEvent?.(e);
          }
        },
        { after, ...(onError ? { onError } : {}) },
      );
      return { received, batches, subscription };
    }

    describe('appending and reading a stream', () => {
      it('reads back what was appended: ids, types, data, metadata, revisions, positions', async () => {
        const stream = newStream();
        const ids = [randomUUID(), randomUUID()];
        const metadata = { correlationId: randomUUID(), causationId: randomUUID(), traceparent: '00-abc-def-01' };

        const result = await store.appendToStream(
          stream,
          [
            { id: ids[0], type: 'Opened', data: { owner: 'ada', tags: ['a', 'b'], limit: 3 }, metadata },
            { id: ids[1], type: 'Renamed', data: { name: 'x' } },
          ],
          { expectedRevision: 'no_stream' },
        );

        const read = await store.readStream(stream);
        expect(read).toMatchObject([
          { id: ids[0], type: 'Opened', data: { owner: 'ada', tags: ['a', 'b'], limit: 3 }, metadata, streamName: stream, revision: 0 },
          { id: ids[1], type: 'Renamed', data: { name: 'x' }, metadata: {}, streamName: stream, revision: 1 },
        ]);
        expect(result).toEqual({ nextExpectedRevision: 1, position: read[1]!.position });
        expect(read[0]!.position).toBeLessThan(read[1]!.position);
        expect(read[0]!.created).toEqual(expect.any(Number));
      });

      it('numbers revisions 0..n across appends, each append continuing from the last', async () => {
        const stream = newStream();
        const first = await store.appendToStream(stream, events(1), { expectedRevision: 'no_stream' });
        const second = await store.appendToStream(stream, events(3, 1), { expectedRevision: first.nextExpectedRevision });

        expect(first.nextExpectedRevision).toBe(0);
        expect(second.nextExpectedRevision).toBe(3);
        const read = await store.readStream(stream);
        expect(read.map((e) => e.revision)).toEqual([0, 1, 2, 3]);
        expect(read.map((e) => e.data)).toEqual([{ n: 0 }, { n: 1 }, { n: 2 }, { n: 3 }]);
      });

      it('rejects no_stream on an existing stream and leaves the stream unchanged', async () => {
        const stream = newStream();
        await store.appendToStream(stream, [event('Created')], { expectedRevision: 'no_stream' });

        const error = await conflict(store.appendToStream(stream, [event('Again')], { expectedRevision: 'no_stream' }));

        expect(error).toMatchObject({ streamName: stream, expected: 'no_stream', actual: 0 });
        expect((await store.readStream(stream)).map((e) => e.type)).toEqual(['Created']);
      });

      it('rejects a stale or future revision, reporting the actual one', async () => {
        const stream = newStream();
        await store.appendToStream(stream, events(2), { expectedRevision: 'no_stream' });

        const stale = await conflict(store.appendToStream(stream, events(1), { expectedRevision: 0 }));
        const future = await conflict(store.appendToStream(stream, events(1), { expectedRevision: 5 }));

        expect(stale).toMatchObject({ streamName: stream, expected: 0, actual: 1 });
        expect(future).toMatchObject({ streamName: stream, expected: 5, actual: 1 });
        expect(await store.readStream(stream)).toHaveLength(2);
      });

      it('rejects a numeric revision on a missing stream, reporting no_stream', async () => {
        const stream = newStream();
        const error = await conflict(store.appendToStream(stream, events(1), { expectedRevision: 0 }));
        expect(error).toMatchObject({ streamName: stream, expected: 0, actual: 'no_stream' });
        expect(await store.readStream(stream)).toEqual([]);
      });

      it('appends with any to a missing and to an existing stream', async () => {
        const stream = newStream();
        const first = await store.appendToStream(stream, events(1), { expectedRevision: 'any' });
        const second = await store.appendToStream(stream, events(2, 1), { expectedRevision: 'any' });

        expect([first.nextExpectedRevision, second.nextExpectedRevision]).toEqual([0, 2]);
        expect((await store.readStream(stream)).map((e) => e.revision)).toEqual([0, 1, 2]);
      });

      it('reads a missing stream as an empty array', async () => {
        expect(await store.readStream(newStream())).toEqual([]);
      });

      it('reads a stream from a revision and up to maxCount', async () => {
        const stream = newStream();
        await store.appendToStream(stream, events(5), { expectedRevision: 'no_stream' });
        const revisions = async (options: { fromRevision?: number; maxCount?: number }) =>
          (await store.readStream(stream, options)).map((e) => e.revision);

        expect(await revisions({ fromRevision: 2 })).toEqual([2, 3, 4]);
        expect(await revisions({ maxCount: 2 })).toEqual([0, 1]);
        expect(await revisions({ fromRevision: 1, maxCount: 2 })).toEqual([1, 2]);
        expect(await revisions({ fromRevision: 5 })).toEqual([]);
      });
    });

    describe('the global log', () => {
      it('reads all streams in append order, `after` being exclusive and maxCount a prefix', async () => {
        const [a, b] = [newStream(), newStream()];
        const after = await mark();
        const a0 = await store.appendToStream(a, [event('A0')], { expectedRevision: 'no_stream' });
        const b0 = await store.appendToStream(b, [event('B0')], { expectedRevision: 'no_stream' });
        const a1 = await store.appendToStream(a, [event('A1')], { expectedRevision: 0 });
        const ours = (read: StoredEvent[]) => read.filter((e) => e.streamName === a || e.streamName === b);

        const all = ours(await store.readAll({ after, maxCount: 1000 }));
        expect(all.map((e) => [e.streamName, e.type])).toEqual([[a, 'A0'], [b, 'B0'], [a, 'A1']]);
        expect(all.map((e) => e.position)).toEqual([a0.position, b0.position, a1.position]);

        expect(ours(await store.readAll({ after: a0.position, maxCount: 1000 })).map((e) => e.type)).toEqual(['B0', 'A1']);
        expect(ours(await store.readAll({ after: a1.position, maxCount: 1000 }))).toEqual([]);
        const firstTwo = await store.readAll({ after, maxCount: 2 });
        expect(firstTwo).toEqual((await store.readAll({ after, maxCount: 1000 })).slice(0, 2));
      });

      it('reads from the beginning of the log when `after` is omitted', async () => {
        const after = await mark();
        const [first] = await store.readAll({ maxCount: 1 });
        expect(first!.position).toBeLessThanOrEqual(after);
      });

      it('gives every event a strictly increasing position, the same in readStream and readAll', async () => {
        const [a, b] = [newStream(), newStream()];
        const after = await mark();
        await store.appendToStream(a, events(3), { expectedRevision: 'no_stream' });
        await store.appendToStream(b, events(2), { expectedRevision: 'no_stream' });
        await store.appendToStream(a, events(2, 3), { expectedRevision: 2 });

        const all = (await store.readAll({ after, maxCount: 1000 })).filter((e) => [a, b].includes(e.streamName));
        const positions = all.map((e) => e.position);
        expect(positions).toHaveLength(7);
        positions.slice(1).forEach((p, i) => expect(p).toBeGreaterThan(positions[i]!));
        const byStream = [...(await store.readStream(a)), ...(await store.readStream(b))];
        expect(byStream.map((e) => e.position).sort((x, y) => x - y)).toEqual(positions);
      });
    });

    describe('subscribing to the global log', () => {
      it('catches up with stored events, then delivers events appended later', async () => {
        const stream = newStream();
        const after = await mark();
        await store.appendToStream(stream, events(2), { expectedRevision: 'no_stream' });

        const { received, subscription } = subscribe([stream], after);
        await waitFor(() => expect(received).toHaveLength(2));
        await store.appendToStream(stream, events(1, 2), { expectedRevision: 1 });
        await waitFor(() => expect(received).toHaveLength(3));
        await subscription.stop();

        expect(received.map((e) => e.revision)).toEqual([0, 1, 2]);
        expect(received).toEqual(await store.readStream(stream));
      });

      it('starts after the given position', async () => {
        const stream = newStream();
        await store.appendToStream(stream, events(3), { expectedRevision: 'no_stream' });
        const [, second] = await store.readStream(stream);

        const { received, subscription } = subscribe([stream], second!.position);
        await waitFor(() => expect(received).toHaveLength(1));
        await subscription.stop();

        expect(received[0]!.revision).toBe(2);
      });

      it('calls the handler one batch at a time, in position order', async () => {
        const [a, b] = [newStream(), newStream()];
        const after = await mark();
        let inFlight = 0;
        let maxInFlight = 0;
        const { received, subscription } = subscribe([a, b], after, async () => {
          inFlight += 1;
          maxInFlight = Math.max(maxInFlight, inFlight);
          await nextTurn();
          inFlight -= 1;
        });

        await store.appendToStream(a, events(4), { expectedRevision: 'no_stream' });
        await store.appendToStream(b, events(3), { expectedRevision: 'no_stream' });
        await store.appendToStream(a, events(3, 4), { expectedRevision: 3 });
        await waitFor(() => expect(received).toHaveLength(10));
        await subscription.stop();

        expect(maxInFlight).toBe(1);
        const positions = received.map((e) => e.position);
        expect(positions).toEqual([...positions].sort((x, y) => x - y));
        expect(received.filter((e) => e.streamName === a).map((e) => e.revision)).toEqual([0, 1, 2, 3, 4, 5, 6]);
      });

      it('stops at a failing handler, reports it, and skips nothing when resumed', async () => {
        const stream = newStream();
        const after = await mark();
        await store.appendToStream(stream, events(3), { expectedRevision: 'no_stream' });
        const boom = new Error('handler failed');
        const failed = deferred<{ error: unknown; events: readonly StoredEvent[] }>();

        const { received, subscription } = subscribe(
          [stream],
          after,
          (e) => {
            if (e.revision === 1) throw boom;
          },
          (error, events) => failed.resolve({ error, events }),
        );
        const { error, events: failedBatch } = await failed.promise;
        await subscription.stop();

        expect(error).toBe(boom);
        expect(failedBatch.filter((e) => e.streamName === stream).map((e) => e.revision)).toContain(1);
        expect(received.map((e) => e.revision)).toEqual([0, 1]);

        // The handler decides how far it got; here it had handled revision 0.
        const resumed = subscribe([stream], received[0]!.position);
        await waitFor(() => expect(resumed.received.map((e) => e.revision)).toEqual([1, 2]));
        await resumed.subscription.stop();
      });

      it('stop() resolves only after the handler in flight finishes, and no event is delivered after it', async () => {
        const stream = newStream();
        const after = await mark();
        const entered = deferred();
        const release = deferred();
        let finished = false;
        const { received, batches, subscription } = subscribe([stream], after, async () => {
          entered.resolve();
          await release.promise;
          finished = true;
        });
        await store.appendToStream(stream, events(2), { expectedRevision: 'no_stream' });
        await entered.promise;

        let stopped = false;
        const stopping = subscription.stop().then(() => (stopped = true));
        await nextTurn();
        expect(stopped).toBe(false);
        release.resolve();
        await stopping;
        expect(finished).toBe(true);

        await store.appendToStream(stream, events(1, 2), { expectedRevision: 1 });
        // Once a fresh subscription has seen everything, the stopped one would have had its chance too.
        const witness = subscribe([stream], after);
        await waitFor(() => expect(witness.received).toHaveLength(3));
        await witness.subscription.stop();
        // Only the batch in flight at stop() was handled: the event appended afterwards never came.
        expect(batches).toHaveLength(1);
        expect(received.map((e) => e.revision)).not.toContain(2);
      });
    });

    describe('optimistic concurrency under contention', () => {
      it('lets exactly one of 20 concurrent appends at the same revision win', async () => {
        const stream = newStream();
        await store.appendToStream(stream, [event('Created')], { expectedRevision: 'no_stream' });

        const results = await Promise.allSettled(
          Array.from({ length: 20 }, (_, i) =>
            store.appendToStream(stream, [event('Bumped', { i })], { expectedRevision: 0 }),
          ),
        );

        const lost = results.filter((r) => r.status === 'rejected');
        expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
        expect(lost).toHaveLength(19);
        for (const r of lost) {
          expect(r.reason).toBeInstanceOf(WrongExpectedRevisionError);
          expect(r.reason).toMatchObject({ expected: 0, actual: 1 });
        }
        expect(await store.readStream(stream)).toHaveLength(2);
      });

      it('lets exactly one of 20 concurrent creates win', async () => {
        const stream = newStream();
        const results = await Promise.allSettled(
          Array.from({ length: 20 }, (_, i) =>
            store.appendToStream(stream, [event('Created', { i })], { expectedRevision: 'no_stream' }),
          ),
        );

        expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
        expect(await store.readStream(stream)).toHaveLength(1);
      });
    });

    describe('checkpoints', () => {
      it('loads nothing for an unknown name, then the last stored position', async () => {
        const { checkpoints } = opened;
        const [name, other] = [`contract-${randomUUID()}`, `contract-${randomUUID()}`];

        expect(await checkpoints.load(name)).toBeUndefined();
        await checkpoints.store(name, 5);
        expect(await checkpoints.load(name)).toBe(5);
        await checkpoints.store(name, 42);
        expect(await checkpoints.load(name)).toBe(42);
        expect(await checkpoints.load(other)).toBeUndefined();
      });

      it('keeps checkpoints out of the global log', async () => {
        const stream = newStream();
        const after = await mark();
        await opened.checkpoints.store(`contract-${randomUUID()}`, 1);
        await store.appendToStream(stream, events(1), { expectedRevision: 'no_stream' });

        const read = await store.readAll({ after, maxCount: 1000 });
        expect(read.filter((e) => e.streamName.startsWith('checkpoint-'))).toEqual([]);
        expect(read.map((e) => e.streamName)).toContain(stream);
      });
    });

    it('reports the head of the global log: at or past every append answered before', async () => {
      const first = await mark();
      expect(await store.headPosition()).toBeGreaterThanOrEqual(first);
      await store.appendToStream(newStream(), events(3), { expectedRevision: 'no_stream' });
      const last = await mark();
      expect(await store.headPosition()).toBeGreaterThanOrEqual(last);
    });

    it('answers ping', async () => {
      await expect(store.ping()).resolves.toBeUndefined();
    });
  });
}
