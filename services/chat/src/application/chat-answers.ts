import type { ChatCompletion, ChoiceLogprobs, FinishReason, TokenLogprob, ToolCall, Usage } from '@oc/contracts';
import type { GenerationEvent, ServedBy } from './ports';

/** One choice as generated: its text, the tools it called, its tokens' log probabilities when asked for. */
export interface ChoiceOutcome {
  text: string;
  toolCalls: ToolCall[];
  logprobs?: TokenLogprob[];
  finishReason: FinishReason;
}

export interface Outcome {
  choices: ChoiceOutcome[];
  usage: Usage;
  /** The deployment that served the last choice, and what every choice cost us (micro-USD). */
  served?: ServedBy;
  providerCostMicros: number;
}

/** What reaches the caller as it is generated; `index` is the choice's among the whole answer's. */
export type Progress =
  | { type: 'content'; index: number; text: string; logprobs?: TokenLogprob[] }
  | { type: 'tool_call'; index: number; call: number; id?: string; name?: string; arguments: string }
  | { type: 'finish'; index: number; finishReason: FinishReason };

/** The choices of one provider call, built from its events (choice `offset + i` for the call's choice `i`). */
export class ChoiceBuilder {
  readonly choices: ChoiceOutcome[];

  constructor(
    count: number,
    private readonly offset: number,
  ) {
    this.choices = Array.from({ length: count }, () => ({ text: '', toolCalls: [], finishReason: 'stop' as FinishReason }));
  }

  /** Adds an event to its choice, and says what to show the caller of it. */
  add(event: Exclude<GenerationEvent, { type: 'served' }>): Progress | undefined {
    const local = event.index ?? 0;
    const choice = this.choices[local];
    if (!choice) return undefined;
    const index = this.offset + local;
    if (event.type === 'content') {
      choice.text += event.text;
      if (event.logprobs) (choice.logprobs ??= []).push(...event.logprobs);
      return { type: 'content', index, text: event.text, ...(event.logprobs ? { logprobs: event.logprobs } : {}) };
    }
    if (event.type === 'tool_call') {
      const { call, id, name } = event.fragment;
      const known = choice.toolCalls[call];
      if (known) known.function.arguments += event.fragment.arguments;
      else choice.toolCalls[call] = { id: id ?? `call_${index}_${call}`, type: 'function', function: { name: name ?? '', arguments: event.fragment.arguments } };
      return { type: 'tool_call', index, call, ...(known ? {} : { id: choice.toolCalls[call]!.id, name: choice.toolCalls[call]!.function.name }), arguments: event.fragment.arguments };
    }
    choice.finishReason = event.finishReason;
    return { type: 'finish', index, finishReason: event.finishReason };
  }

  /** Whether anything of these choices reached the caller. */
  delivered(): boolean {
    return this.choices.some((c) => c.text !== '' || c.toolCalls.length > 0);
  }
}

/** What a choice's completion tokens are counted from when the provider reports no usage. */
export const generatedText = (choice: ChoiceOutcome) =>
  [choice.text, ...choice.toolCalls.flatMap((c) => [c.function.name, c.function.arguments])].filter((t) => t !== '').join('\n');

const logprobsOf = (choice: ChoiceOutcome, asked: boolean): ChoiceLogprobs | null =>
  asked ? { content: choice.logprobs ?? [], refusal: null } : null;

/** The chat completion object of a whole answer. */
export function chatCompletionBody(
  head: { id: string; created: number; model: string; sessionId: string; logprobs: boolean },
  outcome: Outcome,
): ChatCompletion {
  return {
    id: head.id,
    object: 'chat.completion',
    created: head.created,
    model: head.model,
    choices: outcome.choices.map((c, index) => ({
      index,
      message: {
        role: 'assistant',
        // OpenAI's shape: a turn of tool calls only has null content.
        content: c.toolCalls.length > 0 && c.text === '' ? null : c.text,
        refusal: null,
        ...(c.toolCalls.length > 0 ? { tool_calls: c.toolCalls } : {}),
      },
      logprobs: logprobsOf(c, head.logprobs),
      finish_reason: c.finishReason,
    })),
    usage: outcome.usage,
    session_id: head.sessionId,
  };
}

/**
 * The chunks of a streamed chat completion, as OpenAI sends them: each choice opens with its role, then text (with
 * its tokens' log probabilities when asked for) or tool-call deltas (the first of a call with its id, type and
 * name, then fragments of its arguments), then an empty delta with the finish reason; usage last, when asked for.
 */
export function chatChunks(head: { id: string; created: number; model: string; sessionId: string; choices: number; logprobs: boolean; includeUsage: boolean }) {
  const chunk = (choices: unknown[], usage?: Usage) => ({
    id: head.id,
    object: 'chat.completion.chunk',
    created: head.created,
    model: head.model,
    choices,
    session_id: head.sessionId,
    ...(head.includeUsage ? { usage: usage ?? null } : {}),
  });
  const logprobs = head.logprobs ? { logprobs: null } : {};
  return {
    first: () =>
      Array.from({ length: head.choices }, (_, index) => chunk([{ index, delta: { role: 'assistant', content: '' }, ...logprobs, finish_reason: null }])),
    progress(p: Progress) {
      switch (p.type) {
        case 'content':
          return chunk([
            {
              index: p.index,
              delta: { content: p.text },
              ...(head.logprobs ? { logprobs: { content: p.logprobs ?? [], refusal: null } } : {}),
              finish_reason: null,
            },
          ]);
        case 'tool_call': {
          const opening = p.id !== undefined ? { id: p.id, type: 'function' } : {};
          const fn = p.name !== undefined ? { name: p.name, arguments: p.arguments } : { arguments: p.arguments };
          return chunk([{ index: p.index, delta: { tool_calls: [{ index: p.call, ...opening, function: fn }] }, ...logprobs, finish_reason: null }]);
        }
        case 'finish':
          return chunk([{ index: p.index, delta: {}, ...logprobs, finish_reason: p.finishReason }]);
      }
    },
    last: (outcome: Outcome) => (head.includeUsage ? [chunk([], outcome.usage)] : []),
  };
}
