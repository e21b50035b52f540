import type { AppendResult, EventMetadata, EventStore, NewEvent, StoredEvent } from './port';
import { WrongExpectedRevisionError } from './port';

export interface DomainEvent<Type extends string = string, Data = unknown> {
  type: Type;
  data: Data;
}

/** An aggregate as a pure decider (Emmett's shape): no I/O, time and ids arrive on the command. */
export interface Decider<State, Command, Event extends DomainEvent> {
  decide(command: Command, state: State): Event[];
  evolve(state: State, event: Event): State;
  initialState(): State;
}

export async function aggregateStream<State, Event extends DomainEvent>(
  store: EventStore,
  streamName: string,
  decider: Pick<Decider<State, never, Event>, 'evolve' | 'initialState'>,
): Promise<{ state: State; revision: number | 'no_stream' }> {
  const events = await store.readStream(streamName);
  let state = decider.initialState();
  for (const e of events) state = decider.evolve(state, e as unknown as Event);
  const last = events.at(-1);
  return { state, revision: last ? last.revision : 'no_stream' };
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

export interface HandleResult<State, Event> {
  state: State;
  events: Event[];
  /** Undefined when the decider produced no events (an idempotent repeat). */
  appended?: AppendResult;
}

/**
 * Load, decide, append with optimistic concurrency. Commands on one stream run one at a time in this
 * process; a conflict with another process is retried a bounded number of times with backoff.
 * The state of recently used streams is kept and trusted: a command on a known stream reads nothing, and
 * only a conflict (another writer appended meanwhile) makes it read the events appended since. So long
 * streams (an account's reservations) cost the same per command as short ones.
 */
export class CommandHandler {
  private readonly mutex = new KeyedMutex();
  #lastAppended = -1;
  private readonly states = new Map<string, { decider: unknown; state: unknown; revision: number | 'no_stream' }>();

  constructor(
    private readonly store: EventStore,
    private readonly options: { maxAttempts?: number; newEventId?: () => string; maxCachedStreams?: number } = {},
  ) {}

  handle<State, Command, Event extends DomainEvent>(
    streamName: string,
    decider: Decider<State, Command, Event>,
    command: Command,
    metadata?: EventMetadata,
  ): Promise<HandleResult<State, Event>> {
    return this.mutex.run(streamName, async () => {
      const maxAttempts = this.options.maxAttempts ?? 5;
      for (let attempt = 1; ; attempt++) {
        const { state, revision } = await this.read(streamName, decider, attempt > 1);
        const events = decider.decide(command, state);
        if (events.length === 0) return { state, events };
        const toAppend: NewEvent[] = events.map((e) => ({
          type: e.type,
          data: e.data,
          ...(this.options.newEventId ? { id: this.options.newEventId() } : {}),
          ...(metadata ? { metadata } : {}),
        }));
        try {
          const appended = await this.store.appendToStream(streamName, toAppend, { expectedRevision: revision });
          this.#lastAppended = Math.max(this.#lastAppended, appended.position);
          const next = events.reduce((s, e) => decider.evolve(s, e), state);
          this.remember(streamName, decider, next, appended.nextExpectedRevision);
          return { state: next, events, appended };
        } catch (error) {
          if (!(error instanceof WrongExpectedRevisionError) || attempt >= maxAttempts) throw error;
          await new Promise((r) => setTimeout(r, Math.min(100, 2 ** attempt) * Math.random()));
        }
      }
    });
  }

  /** Global position of the last event appended through this handler; -1 before the first. */
  get lastAppended(): number {
    return this.#lastAppended;
  }

  /**
   * A stream's state as of its last event: the kept state and the events appended since (by anyone), read
   * one stream at a time like commands. Callers must not change it; commands keep evolving it.
   */
  load<State, Event extends DomainEvent>(
    streamName: string,
    decider: Pick<Decider<State, never, Event>, 'evolve' | 'initialState'>,
  ): Promise<State> {
    return this.mutex.run(streamName, async () => (await this.read(streamName, decider, true)).state);
  }

  /** The kept state, or (when there is none, or `refresh`) the events read since its revision applied to it. */
  private async read<State, Event extends DomainEvent>(
    streamName: string,
    decider: Pick<Decider<State, never, Event>, 'evolve' | 'initialState'>,
    refresh: boolean,
  ): Promise<{ state: State; revision: number | 'no_stream' }> {
    const cached = this.states.get(streamName);
    if (cached?.decider === decider && !refresh) return { state: cached.state as State, revision: cached.revision };
    let state = cached?.decider === decider ? (cached.state as State) : decider.initialState();
    let revision = cached?.decider === decider ? cached.revision : 'no_stream';
    const newer = await this.store.readStream(streamName, { fromRevision: revision === 'no_stream' ? 0 : revision + 1 });
    for (const e of newer) state = decider.evolve(state, e as unknown as Event);
    const last = newer.at(-1);
    if (last) revision = last.revision;
    this.remember(streamName, decider, state, revision);
    return { state, revision };
  }

  private remember(streamName: string, decider: unknown, state: unknown, revision: number | 'no_stream') {
    this.states.delete(streamName);
    this.states.set(streamName, { decider, state, revision });
    if (this.states.size > (this.options.maxCachedStreams ?? 10_000)) {
      const oldest = this.states.keys().next().value;
      if (oldest !== undefined) this.states.delete(oldest);
    }
  }
}

export type { StoredEvent };
