import { createHash } from 'node:crypto';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import { type ChatMessage, contentText, type FunctionTool, isInstruction, type TokenLogprob } from '@oc/contracts';
import type { ChatProvider, GenerationEvent, GenerationRequest, Tokenizer } from '../application/ports';
import { instanceOf } from '../domain/json-instance';

export interface SimulatorOptions {
  tokenizer: Tokenizer;
  /** Pause between streamed words; 0 still yields to the event loop so a cancellation can land. */
  wordDelayMs: number;
}

const STOP_WORDS = new Set(
  'a an and are as at be but by can do does for from has have how i if in into is it its me my of on or our please so that the their them then there these this to us was we what when where which who why will with would you your tell explain write about could should give start make get need want know think find use also just more some any very'.split(
    ' ',
  ),
);

const OPENINGS = [
  (t: string) => `You asked about ${t}.`,
  (t: string) => `Here is a short answer on ${t}.`,
  (t: string) => `Let us look at ${t} step by step.`,
];

const BODY = [
  (a: string, b: string) => `At its core, ${a} depends on ${b}, and each shapes the other over time.`,
  (a: string, b: string) => `A practical first step is to be clear about ${a} before weighing ${b}.`,
  (a: string, b: string) => `Most of the difficulty lies in ${a}, so it pays to start small and measure what ${b} changes.`,
  (a: string, b: string) => `People who work with ${a} often find that ${b} matters more than expected.`,
  (a: string, b: string) => `It also helps to compare ${a} with ${b} and note where they disagree.`,
];

const CLOSINGS = [
  (a: string, b: string) => `In short, ${a} works best when ${b} is treated as part of the same picture.`,
  (a: string, b: string) => `Taken together, ${a} and ${b} give a sound place to begin.`,
];

/** Pieces of a JSON answer or of tool arguments as they are streamed (JSON text has no spaces to split at). */
const JSON_PIECE = /[^]{1,16}/g;
/** Alternatives the simulator's `top_logprobs` list after the token it chose. */
const ALTERNATIVES = [' the', ' a', ' and', ' of', ' to', ' in', ',', '.', ' is', ' that', ' it', ' for', ' on', ' with', ' as', ' be', ' this', ' by', ' or', ' at', ' from'];

/**
 * The embedded upstream: a deterministic, fluent-looking reply built from the last message (the same request
 * always gets the same reply, whatever the temperature), streamed word by word, cut by `stop` sequences and by
 * `max_tokens` counted with the shared tokenizer. It emulates the rest of the contract offline: with tools (and a
 * tool_choice other than `none`) it calls one, with arguments valid against the tool's schema, unless the last
 * message is a tool result under `auto`, which it answers in text; a JSON response format gets JSON (valid against
 * the schema); `n` choices differ from one another; `seed` picks another reply; `logprobs` are plausible (one
 * entry per streamed piece, negative, alternatives sorted); image parts are read as nothing.
 */
export class SimulatorProvider implements ChatProvider {
  constructor(private readonly options: SimulatorOptions) {}

  async *generate(request: GenerationRequest, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    for (let index = 0; index < (request.n ?? 1); index++) {
      if (signal.aborted) return;
      // The first choice without a seed is the reply the simulator always gave; others vary by choice and seed.
      const salt = index === 0 && request.seed === undefined ? '' : `${request.seed ?? ''}/${index}`;
      const tool = chosenTool(request);
      if (tool) yield* this.callTool(tool, request, salt, index, signal);
      else yield* this.answer(request, salt, index, signal);
    }
  }

  private async *callTool(tool: FunctionTool, request: GenerationRequest, salt: string, index: number, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    const name = tool.function.name;
    const id = `call_${digest(`${salt}\n${name}\n${lastTurnText(request.messages)}`).toString('base64url').slice(0, 24)}`;
    yield { type: 'tool_call', index, fragment: { call: 0, id, name, arguments: '' } };
    for (const piece of JSON.stringify(instanceOf(tool.function.parameters ?? { type: 'object' })).match(JSON_PIECE) ?? []) {
      await this.pause(signal);
      if (signal.aborted) return;
      yield { type: 'tool_call', index, fragment: { call: 0, arguments: piece } };
    }
    yield { type: 'finish', index, finishReason: 'tool_calls' };
  }

  private async *answer(request: GenerationRequest, salt: string, index: number, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    let reply = composeReply(request.messages, salt);
    const format = request.responseFormat;
    if (format?.type === 'json_schema') reply = JSON.stringify(instanceOf(format.json_schema.schema ?? { type: 'object' }));
    else if (format?.type === 'json_object') reply = JSON.stringify({ answer: reply });
    let finishReason: 'stop' | 'length' = 'stop';
    const stopAt = Math.min(...request.stop.map((s) => reply.indexOf(s)).filter((i) => i >= 0));
    if (Number.isFinite(stopAt)) reply = reply.slice(0, stopAt);
    let sent = '';
    const pieces = (format === undefined ? reply.match(/\s*\S+|\s+$/g) : reply.match(JSON_PIECE)) ?? [];
    for (const [position, piece] of pieces.entries()) {
      if (signal.aborted) return;
      if (this.options.tokenizer.count(sent + piece) > request.maxTokens) {
        finishReason = 'length';
        break;
      }
      sent += piece;
      const logprobs = request.logprobs && [tokenLogprob(piece, `${salt}/${position}`, request.logprobs.top)];
      yield { type: 'content', index, text: piece, ...(logprobs ? { logprobs } : {}) };
      await this.pause(signal);
    }
    if (signal.aborted) return;
    yield { type: 'finish', index, finishReason };
  }

  private pause(signal: AbortSignal) {
    return this.options.wordDelayMs > 0 ? sleep(this.options.wordDelayMs, undefined, { signal }).catch(() => undefined) : nextTurn();
  }
}

const digest = (text: string) => createHash('sha256').update(text).digest();

/** The tool to call, if any: the named one; else, unless a tool result is to be answered, the likeliest one. */
function chosenTool(request: GenerationRequest): FunctionTool | undefined {
  const tools = request.tools ?? [];
  const choice = request.toolChoice;
  if (tools.length === 0 || choice === 'none') return undefined;
  if (typeof choice === 'object') return tools.find((t) => t.function.name === choice.function.name);
  const last = [...request.messages].reverse().find((m) => !isInstruction(m));
  if (choice !== 'required' && last?.role === 'tool') return undefined;
  // The tool whose name and description share the most words with the last message; the first on a tie.
  const words = new Set(lastTurnText(request.messages).toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []);
  const score = (t: FunctionTool) =>
    (`${t.function.name.replace(/[_-]/g, ' ')} ${t.function.description ?? ''}`.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).filter((w) => words.has(w)).length;
  return tools.reduce((best, t) => (score(t) > score(best) ? t : best), tools[0]!);
}

function lastTurnText(messages: ChatMessage[]): string {
  const last = [...messages].reverse().find((m) => !isInstruction(m)) ?? messages.at(-1);
  return contentText(last?.content);
}

/** A plausible entry: the piece chosen at a logprob in (-2, 0), then alternatives, each less likely than the one before. */
function tokenLogprob(token: string, salt: string, top: number): TokenLogprob {
  const seed = digest(`${salt}\n${token}`);
  const logprob = -((seed[0]! * 256 + seed[1]!) / 65536) * 2 - 1e-4;
  const alternatives = ALTERNATIVES.filter((t) => t !== token).slice(0, Math.max(0, top - 1));
  const bytes = (t: string) => [...Buffer.from(t, 'utf8')];
  return {
    token,
    logprob,
    bytes: bytes(token),
    top_logprobs: top === 0 ? [] : [{ token, logprob, bytes: bytes(token) }, ...alternatives.map((t, i) => ({ token: t, logprob: logprob - 1 - i - seed[2 + i]! / 256, bytes: bytes(t) }))],
  };
}

/** `salt` varies the reply (another choice, a seed); without it the same prompt always gets the same reply. */
export function composeReply(messages: ChatMessage[], salt = ''): string {
  const prompt = lastTurnText(messages);
  const seed = digest(salt === '' ? prompt : `${prompt}\n${salt}`);
  const pick = <T>(items: readonly T[], i: number) => items[seed[i]! % items.length]!;
  const words = (prompt.toLowerCase().match(/[\p{L}\p{N}'-]+/gu) ?? []).filter((w) => w.length > 2 && !STOP_WORDS.has(w));
  const keywords = [...new Set(words)].slice(0, 6);
  while (keywords.length < 3) keywords.push(['the question', 'the context', 'the goal'][keywords.length]!);
  const [k1, k2, k3] = keywords as [string, string, string];
  const topic = keywords.length > 3 ? `${k1} and ${keywords[3]}` : k1;
  const sentences = [pick(OPENINGS, 0)(topic)];
  const emphasis = leadingEmphasis(messages);
  if (emphasis) sentences.push(`Leaning towards ${emphasis}, the answer puts that lens first.`);
  const first = seed[1]! % BODY.length;
  sentences.push(BODY[first]!(k1, k2), BODY[(first + 1 + (seed[2]! % (BODY.length - 1))) % BODY.length]!(k2, k3));
  sentences.push(pick(CLOSINGS, 3)(k1, k3));
  return sentences.join(' ');
}

/** The simulator honours the theory-position instruction by naming its heaviest corner. */
function leadingEmphasis(messages: ChatMessage[]): string | undefined {
  for (const m of messages) {
    if (m.role !== 'system') continue;
    const found = /theories of change: ([a-z]+) \(([^)]+)\)/.exec(contentText(m.content));
    if (found) return `${found[1]} (${found[2]})`;
  }
  return undefined;
}
