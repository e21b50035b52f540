import { deciderSpec } from '@oc/eventstore/testing';
import { describe, expect, it } from 'vitest';
import { completionDecider, type CompletionEvent } from '../src/domain/completion';

const spec = deciderSpec(completionDecider);
const started: CompletionEvent = {
  type: 'CompletionStarted',
  data: { completion_id: 'chatcmpl_1', org_id: 'org_1', replica: 'chat-a', reserved_micros: 800, started_at: 1_000, deadline: 61_000 },
};
const start = {
  type: 'StartCompletion',
  completionId: 'chatcmpl_1',
  orgId: 'org_1',
  replica: 'chat-a',
  reservedMicros: 800,
  now: 1_000,
  deadline: 61_000,
} as const;

describe('completion decider', () => {
  it('records a completion once, however often it is started', () => {
    expect(spec.given([]).when(start)).toEqual({ events: [started] });
    expect(spec.given([started]).when(start)).toEqual({ events: [] });
  });

  it('settles an open completion once: a second settlement (a racing replica) decides nothing', () => {
    const settle = { type: 'SettleCompletion', completionId: 'chatcmpl_1', outcome: 'interrupted', chargedMicros: 0 } as const;
    const settled: CompletionEvent = {
      type: 'CompletionSettled',
      data: { completion_id: 'chatcmpl_1', org_id: 'org_1', outcome: 'interrupted', charged_micros: 0 },
    };
    expect(spec.given([started]).when(settle)).toEqual({ events: [settled] });
    expect(spec.given([started, settled]).when({ ...settle, outcome: 'charged', chargedMicros: 500 })).toEqual({ events: [] });
  });

  it('settles nothing that was never started (a crash before it was recorded held no funds)', () => {
    expect(spec.given([]).when({ type: 'SettleCompletion', completionId: 'chatcmpl_1', outcome: 'released', chargedMicros: 0 })).toEqual({
      events: [],
    });
  });
});
