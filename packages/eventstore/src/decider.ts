import { serviceUnavailable, uuidV7 } from '@oc/contracts';
import { activeTrace } from '@oc/telemetry';
import type { AppendResult, EventMetadata, EventStore, NewEvent, StoredEvent } from './port';
import { WrongExpectedRevisionError } from './port';
import type { SnapshotCodec, SnapshotStore } from './snapshots';

export interface DomainEvent<Type extends string = string, Data = unknown> {
  type: Type;
  data: Data;
}

/** An aggregate as a pure decider (Emmett's shape): no I/O, time and ids arrive on the command. */
export interface Decider<State, Command, Event extends DomainEvent> {
  decide(command: Command, state: State): Event[];
  evolve(state: State, event: Event): State;
  initialState(): State;
  /** For a stream that grows without end: its state is kept every so many events, and loaded from there. */
  snapshot?: SnapshotCodec<State>;
}

type Folding<State, Event extends DomainEvent> = Pick<Decider<State, never, Event>, 'evolve' | 'initialState' | 'snapshot'>;

export async function aggregateStream<State, Event extends DomainEvent>(
  store: EventStore,
  streamName: string,
  decider: Pick<Decider<State, never, Event>, 'evolve' | 'initialState'>,
): Promise<{ state: State; revision: number | 'no_stream' }> {
  const { state, revision } = await foldStream(store, streamName, decider, decider.initialState(), 'no_stream');
  return { state, revision };
}

/** Events read and folded a page at a time: a stream of millions (an account's) never sits in memory whole. */
const FOLD_PAGE = 2_000;

/** `state` (as of `revision`) with the stream's later events applied, and the first of them. */
async function foldStream<State, Event extends DomainEvent>(
  store: EventStore,
  streamName: string,
  decider: Pick<Decider<State, never, Event>, 'evolve'>,
  state: State,
  revision: number | 'no_stream',
): Promise<{ state: State; revision: number | 'no_stream'; first: StoredEvent | undefined; last: StoredEvent | undefined }> {
  let first: StoredEvent | undefined;
  let last: StoredEvent | undefined;
  for (;;) {
    const page = await store.readStream(streamName, { fromRevision: revision === 'no_stream' ? 0 : revision + 1, maxCount: FOLD_PAGE });
    first ??= page[0];
    for (const e of page) state = decider.evolve(state, e as unknown as Event);
    if (page.length > 0) {
      last = page.at(-1)!;
      revision = last.revision;
    }
    if (page.length < FOLD_PAGE) return { state, revision, first, last };
  }
}

/** Serializes async work per key inside one process. */
export class KeyedMutex {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const result = previous.then(work, work);
    const tail = result.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }
}

/** A stream's first event: what started it, which the work it causes later continues (`causedBy`). */
export interface StreamOrigin {
  id: string;
  metadata: EventMetadata;
}

/**
 * The metadata of events caused by `event` (work that reacts to it, or resumes what it started): they share its
 * correlation id, and name it as their cause. The trace they belong to is the active one at append.
 */
export function causedBy(event: StreamOrigin): EventMetadata {
  return { correlationId: event.metadata.correlationId ?? event.id, causationId: event.id };
}

/**
 * What a command's events record of where they come from. In a traced request (or traced work resumed from an
 * event), the active span's `traceparent`; its trace id as the correlation id and its span (the message being
 * handled) as the cause, unless the caller named a cause (`causedBy`). Otherwise the caller's metadata, and at
 * append a command with no cause is its own: its first event's id is both (`rootMetadata`).
 */
function commandMetadata(given: EventMetadata | undefined): EventMetadata | undefined {
  const trace = activeTrace();
  if (!trace) return given;
  return {
    ...given,
    correlationId: given?.correlationId ?? trace.traceId,
    causationId: given?.causationId ?? trace.spanId,
    traceparent: trace.traceparent,
  };
}

function rootMetadata(metadata: EventMetadata | undefined, firstEventId: string): EventMetadata {
  if (metadata?.correlationId !== undefined && metadata.causationId !== undefined) return metadata;
  return { ...metadata, correlationId: metadata?.correlationId ?? firstEventId, causationId: metadata?.causationId ?? firstEventId };
}

export interface HandleOptions {
  /**
   * Answer once the command is decided, while its events are still being stored: for a caller whose next
   * step needs the decision (a reservation made or refused) but not yet its durability, so that the store's
   * commit overlaps that step. Honoured only where no other process writes the stream (without
   * `otherWriters`): the decision, made on the kept state, is then final, and every later command on the
   * stream is decided after the append settles. Should the append fail, the decision is lost, as in a crash
   * before it was stored; the stream's next command reads it again from the store. A query through
   * `readYourWrites` still waits for it to be stored (`storing`).
   */
  answerWhenDecided?: boolean;
}

export interface HandleResult<State, Event> {
  state: State;
  events: Event[];
  /** Undefined when the decider produced no events (an idempotent repeat). */
  appended?: AppendResult;
}

/** One command waiting on its stream, with how to answer it. */
interface Pending<State, Command, Event> {
  command: Command;
  metadata: EventMetadata | undefined;
  /** Answered once decided, before its events are stored (`HandleOptions.answerWhenDecided`). */
  early: boolean;
  resolve(result: HandleResult<State, Event>): void;
  reject(error: unknown): void;
}

/** Commands on one stream gathered while an earlier append to it commits; all decided by one decider. */
interface Batch {
  decider: Decider<unknown, unknown, DomainEvent>;
  pending: Array<Pending<unknown, unknown, DomainEvent>>;
  /** The stream is named by a fresh id: decided on the initial state without reading it first. */
  fresh: boolean;
}

/** A stream's state as last seen, and its first event. */
interface Kept {
  decider: unknown;
  state: unknown;
  revision: number | 'no_stream';
  origin: StreamOrigin | undefined;
}

/** Commands one append may carry, so that a burst on one stream commits in bounded transactions. */
const MAX_BATCH = 256;

/**
 * Load, decide, append with optimistic concurrency. Commands on one stream run one at a time in this
 * process; a conflict with another process is retried a bounded number of times with backoff.
 * Commands that arrive for a stream while an append to it is committing are decided one after another on
 * the state it leaves, and their events go in one append with one expected revision: a burst on one stream
 * (an organization's 200 reservations) costs a few commits, not 200, and stays exact, because the whole
 * append fails on a conflict and every command in it is decided again on the fresh state. A command whose
 * decision throws fails alone, after the others' append has settled, against the same state they saw.
 * The state of recently used streams is kept and trusted: a command on a known stream reads nothing, and
 * only a conflict (another writer appended meanwhile) makes it read the events appended since. So long
 * streams (an account's reservations) cost the same per command as short ones. Where replicas of a service
 * write the same streams (`otherWriters`), each decision first reads what was appended since the kept state.
 * A kept state that decided a batch whose append failed is dropped, never reused: deciders may evolve their
 * state in place (an account's reservations), so it may hold events that were never stored.
 */
export class CommandHandler {
  private readonly mutex = new KeyedMutex();
  #lastAppended = -1;
  private readonly states = new Map<string, Kept>();
  /** Per stream, the batch waiting for the stream's current append to settle. */
  private readonly gathering = new Map<string, Batch>();
  /** Appends whose commands were answered before they were stored, until they settle. */
  private readonly answeredAhead = new Set<Promise<unknown>>();

  constructor(
    private readonly store: EventStore,
    private readonly options: {
      maxAttempts?: number;
      newEventId?: () => string;
      maxCachedStreams?: number;
      /**
       * Other processes (replicas of the service) append to the same streams: a kept state is brought up to
       * date (the events appended since it, read first) before every decision, so that a refusal or a
       * decision to do nothing, which no append checks, is made on the stream as it is. Decisions that append
       * are checked by their expected revision either way.
       */
      otherWriters?: boolean;
      /** Where the states of deciders with a `snapshot` codec are kept. */
      snapshots?: SnapshotStore | undefined;
    } = {},
  ) {}

  handle<State, Command, Event extends DomainEvent>(
    streamName: string,
    decider: Decider<State, Command, Event>,
    command: Command,
    metadata?: EventMetadata,
    options?: HandleOptions,
  ): Promise<HandleResult<State, Event>> {
    return this.enqueue(streamName, decider, command, metadata, false, options?.answerWhenDecided === true && this.options.otherWriters !== true);
  }

  /**
   * As `handle`, for a stream its caller just named with a fresh id (a new completion, a new session): it is
   * decided on the initial state without a read, and appended expecting no stream. Should the stream exist
   * after all, the append conflicts and the command is decided again on what it holds.
   */
  handleNew<State, Command, Event extends DomainEvent>(
    streamName: string,
    decider: Decider<State, Command, Event>,
    command: Command,
    metadata?: EventMetadata,
  ): Promise<HandleResult<State, Event>> {
    return this.enqueue(streamName, decider, command, metadata, true, false);
  }

  private enqueue<State, Command, Event extends DomainEvent>(
    streamName: string,
    decider: Decider<State, Command, Event>,
    command: Command,
    metadata: EventMetadata | undefined,
    fresh: boolean,
    early: boolean,
  ): Promise<HandleResult<State, Event>> {
    return new Promise((resolve, reject) => {
      // Taken here, in the caller's context: a batch's commands come from different requests.
      const pending = { command, metadata: commandMetadata(metadata), early, resolve, reject } as Pending<unknown, unknown, DomainEvent>;
      const open = this.gathering.get(streamName);
      if (open && open.decider === decider && open.pending.length < MAX_BATCH) {
        open.pending.push(pending);
        return;
      }
      const batch: Batch = { decider: decider as Decider<unknown, unknown, DomainEvent>, pending: [pending], fresh };
      this.gathering.set(streamName, batch);
      void this.mutex.run(streamName, () => {
        if (this.gathering.get(streamName) === batch) this.gathering.delete(streamName);
        return this.run(streamName, batch);
      });
    });
  }

  private async run(streamName: string, { decider, pending, fresh }: Batch): Promise<void> {
    const maxAttempts = this.options.maxAttempts ?? 8;
    for (let attempt = 1; ; attempt++) {
      let outcomes: Array<{ state: unknown; events: DomainEvent[] } | { error: unknown }> = [];
      try {
        // A kept state is trusted when nobody else writes the stream; where replicas do, what they appended
        // since is read first (one indexed read, usually empty), so refusals and "nothing to do" are decided
        // on the stream as it is.
        const { state, revision } =
          fresh && attempt === 1 && !this.states.has(streamName)
            ? { state: decider.initialState(), revision: 'no_stream' as const }
            : await this.read(streamName, decider, attempt > 1 || this.options.otherWriters === true);
        const decided = decideAll(decider, pending, state);
        outcomes = decided.outcomes;
        const current = decided.state;
        const toAppend: Array<NewEvent & { id: string }> = [];
        outcomes.forEach((outcome, i) => {
          if ('error' in outcome || outcome.events.length === 0) return;
          const ids = outcome.events.map(() => this.newEventId());
          const metadata = rootMetadata(pending[i]!.metadata, ids[0]!);
          outcome.events.forEach((e, j) => toAppend.push({ id: ids[j]!, type: e.type, data: e.data, metadata }));
        });
        // Those answered once decided are answered now. A retry decides them again and stores what it decides;
        // their callers keep the first answer (a promise settles once). They resume only after the append
        // below is queued, so whatever they append next is queued behind it (chat's exchange, behind a capture).
        answerDecided(pending, outcomes);
        const appending = toAppend.length > 0 ? this.store.appendToStream(streamName, toAppend, { expectedRevision: revision }) : undefined;
        if (appending && pending.some((p) => p.early)) this.storingAhead(appending);
        const appended = await appending;
        if (appended) {
          this.#lastAppended = Math.max(this.#lastAppended, appended.position);
          const first = toAppend[0]!;
          const origin = revision === 'no_stream' ? { id: first.id, metadata: first.metadata! } : this.states.get(streamName)?.origin;
          this.remember(streamName, decider, current, appended.nextExpectedRevision, origin);
          this.snapshot(streamName, decider, current, revision, { revision: appended.nextExpectedRevision, id: toAppend.at(-1)!.id });
        }
        outcomes.forEach((outcome, i) => {
          if ('error' in outcome) pending[i]!.reject(outcome.error);
          else pending[i]!.resolve({ ...outcome, ...(appended && outcome.events.length > 0 ? { appended } : {}) });
        });
        return;
      } catch (error) {
        // The batch that failed was evolved into the kept state (some deciders evolve in place, an account's
        // reservations): it is dropped, and the stream read again from its start.
        this.states.delete(streamName);
        if (!(error instanceof WrongExpectedRevisionError) || attempt >= maxAttempts) {
          // Writers that keep racing on one stream are a moment's contention, not a fault: the caller is told to retry.
          const failure = error instanceof WrongExpectedRevisionError ? serviceUnavailable() : error;
          outcomes.forEach((outcome, i) => pending[i]!.reject('error' in outcome ? outcome.error : failure));
          for (const rest of pending.slice(outcomes.length)) rest.reject(failure);
          return;
        }
        await new Promise((r) => setTimeout(r, Math.min(100, 2 ** attempt) * Math.random()));
      }
    }
  }

  /**
   * Settles once every append whose commands were answered before it was stored has settled (undefined when
   * none is in flight): a query that must show what was answered waits for it.
   */
  get storing(): Promise<unknown> | undefined {
    return this.answeredAhead.size === 0 ? undefined : Promise.all([...this.answeredAhead]);
  }

  private storingAhead(appending: Promise<AppendResult>) {
    const settled: Promise<void> = appending.then(
      (appended) => {
        // Here rather than after the awaiting command's batch resumes: a query waiting on `storing` then sees it.
        this.#lastAppended = Math.max(this.#lastAppended, appended.position);
        this.answeredAhead.delete(settled);
      },
      () => {
        this.answeredAhead.delete(settled);
      },
    );
    this.answeredAhead.add(settled);
  }

  private newEventId(): string {
    return this.options.newEventId ? this.options.newEventId() : uuidV7();
  }

  /**
   * The stream's first event (what started it), for work that continues it later: a video's job steps, a
   * delivery's attempts. Kept with the stream's state, else read.
   */
  async origin(streamName: string): Promise<StreamOrigin | undefined> {
    const kept = this.states.get(streamName)?.origin;
    if (kept) return kept;
    const [first] = await this.store.readStream(streamName, { maxCount: 1 });
    return first && { id: first.id, metadata: first.metadata };
  }

  /** Global position of the last event appended through this handler; -1 before the first. */
  get lastAppended(): number {
    return this.#lastAppended;
  }

  /**
   * A stream's state as of its last event: the kept state and the events appended since (by anyone), read
   * one stream at a time like commands. Callers must not change it; commands keep evolving it.
   */
  load<State, Event extends DomainEvent>(streamName: string, decider: Folding<State, Event>): Promise<State> {
    return this.mutex.run(streamName, async () => (await this.read(streamName, decider, true)).state);
  }

  /** The kept state, or (when there is none, or `refresh`) the events read since its revision applied to it. */
  private async read<State, Event extends DomainEvent>(
    streamName: string,
    decider: Folding<State, Event>,
    refresh: boolean,
  ): Promise<{ state: State; revision: number | 'no_stream' }> {
    const cached = this.states.get(streamName);
    if (cached?.decider === decider && !refresh) return { state: cached.state as State, revision: cached.revision };
    const start = cached?.decider === decider ? { state: cached.state as State, revision: cached.revision } : await this.snapshotted(streamName, decider);
    const { state, revision, last, first } = await foldStream(this.store, streamName, decider, start.state, start.revision);
    const origin = cached?.origin ?? (first?.revision === 0 ? { id: first.id, metadata: first.metadata } : undefined);
    this.remember(streamName, decider, state, revision, origin);
    if (last) this.snapshot(streamName, decider, state, start.revision, last);
    return { state, revision };
  }

  /** The stream's kept snapshot when the store still holds the event it was taken at, else the initial state. */
  private async snapshotted<State, Event extends DomainEvent>(
    streamName: string,
    decider: Folding<State, Event>,
  ): Promise<{ state: State; revision: number | 'no_stream' }> {
    const codec = decider.snapshot;
    const kept = codec && this.options.snapshots?.load(streamName);
    if (codec && kept && kept.version === codec.version) {
      const [at] = await this.store.readStream(streamName, { fromRevision: kept.revision, maxCount: 1 });
      if (at?.id === kept.eventId) return { state: codec.decode(kept.state), revision: kept.revision };
    }
    return { state: decider.initialState(), revision: 'no_stream' };
  }

  /** Keeps the state (as of `last`, committed) when the stream's length passed a multiple of `every` since `from`. */
  private snapshot<State>(
    streamName: string,
    decider: { snapshot?: SnapshotCodec<State> },
    state: State,
    from: number | 'no_stream',
    last: { revision: number; id: string },
  ) {
    const codec = decider.snapshot;
    const snapshots = this.options.snapshots;
    if (!codec || !snapshots) return;
    const lengthBefore = from === 'no_stream' ? 0 : from + 1;
    if (Math.floor((last.revision + 1) / codec.every) === Math.floor(lengthBefore / codec.every)) return;
    snapshots.save(streamName, { revision: last.revision, eventId: last.id, version: codec.version, state: codec.encode(state) });
  }

  private remember(streamName: string, decider: unknown, state: unknown, revision: number | 'no_stream', origin: StreamOrigin | undefined) {
    this.states.delete(streamName);
    this.states.set(streamName, { decider, state, revision, origin });
    if (this.states.size > (this.options.maxCachedStreams ?? 10_000)) {
      const oldest = this.states.keys().next().value;
      if (oldest !== undefined) this.states.delete(oldest);
    }
  }
}

/** Answers the commands taken once decided (`early`) with their decision: a refusal or their events. */
function answerDecided(
  pending: ReadonlyArray<Pending<unknown, unknown, DomainEvent>>,
  outcomes: ReadonlyArray<{ state: unknown; events: DomainEvent[] } | { error: unknown }>,
) {
  outcomes.forEach((outcome, i) => {
    const p = pending[i]!;
    if (!p.early) return;
    if ('error' in outcome) p.reject(outcome.error);
    else p.resolve(outcome);
  });
}

/** Each command decided in turn on the state the previous one left; a command that throws fails alone. */
function decideAll(
  decider: Decider<unknown, unknown, DomainEvent>,
  pending: ReadonlyArray<Pending<unknown, unknown, DomainEvent>>,
  state: unknown,
): { state: unknown; outcomes: Array<{ state: unknown; events: DomainEvent[] } | { error: unknown }> } {
  let current = state;
  const outcomes = pending.map(({ command }) => {
    try {
      const events = decider.decide(command, current);
      current = events.reduce((s, e) => decider.evolve(s, e), current);
      return { state: current, events };
    } catch (error) {
      return { error };
    }
  });
  return { state: current, outcomes };
}

export type { StoredEvent };
