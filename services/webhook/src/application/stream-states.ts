import type { Decider, DomainEvent, EventStore } from '@oc/eventstore';

/**
 * The folded state of recently used streams, so that a delivery attempt reads only the events appended since the
 * stream was last looked at instead of the whole stream. Bounded: the least recently used is dropped.
 * (The same idea as `CommandHandler`'s own cache, which keeps its state private.)
 */
export class StreamStates<State, Event extends DomainEvent> {
  private readonly states = new Map<string, { state: State; revision: number | 'no_stream' }>();

  constructor(
    private readonly store: EventStore,
    private readonly decider: Pick<Decider<State, never, Event>, 'evolve' | 'initialState'>,
    private readonly maxStreams = 10_000,
  ) {}

  async load(streamName: string): Promise<State> {
    const cached = this.states.get(streamName);
    let state = cached?.state ?? this.decider.initialState();
    let revision = cached?.revision ?? 'no_stream';
    const newer = await this.store.readStream(streamName, { fromRevision: revision === 'no_stream' ? 0 : revision + 1 });
    for (const e of newer) state = this.decider.evolve(state, e as unknown as Event);
    const last = newer.at(-1);
    if (last) revision = last.revision;
    this.remember(streamName, state, revision);
    return state;
  }

  /** The state after an append, as of the revision of its last event. */
  remember(streamName: string, state: State, revision: number | 'no_stream'): void {
    this.states.delete(streamName);
    this.states.set(streamName, { state, revision });
    if (this.states.size > this.maxStreams) {
      const oldest = this.states.keys().next().value;
      if (oldest !== undefined) this.states.delete(oldest);
    }
  }

  forget(streamName: string): void {
    this.states.delete(streamName);
  }
}
