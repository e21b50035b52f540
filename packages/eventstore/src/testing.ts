import type { Decider, DomainEvent } from './decider';

/**
 * Given/when/then for pure deciders (Emmett's DeciderSpecification, trimmed):
 * `spec.given([events]).when(command)` returns `{events}` or `{error}` for the test to assert on.
 */
export function deciderSpec<State, Command, Event extends DomainEvent>(decider: Decider<State, Command, Event>) {
  return {
    given: (events: Event[]) => ({
      when: (command: Command): { events: Event[] } | { error: unknown } => {
        const state = events.reduce(decider.evolve, decider.initialState());
        try {
          return { events: decider.decide(command, state) };
        } catch (error) {
          return { error };
        }
      },
    }),
  };
}
