import { createHash } from 'node:crypto';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import { type ChatMessage, contentText, isInstruction } from '@oc/contracts';
import type { ChatProvider, GenerationEvent, GenerationRequest, Tokenizer } from '../application/ports';

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

/**
 * The embedded upstream: a deterministic, fluent-looking reply built from the last message (the same
 * prompt always gets the same reply, whatever the temperature), streamed word by word, cut by `stop`
 * sequences and by `max_tokens` counted with the shared tokenizer.
 */
export class SimulatorProvider implements ChatProvider {
  constructor(private readonly options: SimulatorOptions) {}

  async *generate(request: GenerationRequest, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    let reply = composeReply(request.messages);
    let finishReason: 'stop' | 'length' = 'stop';
    const stopAt = Math.min(...request.stop.map((s) => reply.indexOf(s)).filter((i) => i >= 0));
    if (Number.isFinite(stopAt)) reply = reply.slice(0, stopAt);
    let sent = '';
    for (const word of reply.match(/\s*\S+|\s+$/g) ?? []) {
      if (signal.aborted) return;
      if (this.options.tokenizer.count(sent + word) > request.maxTokens) {
        finishReason = 'length';
        break;
      }
      sent += word;
      yield { type: 'content', text: word };
      await (this.options.wordDelayMs > 0 ? sleep(this.options.wordDelayMs, undefined, { signal }).catch(() => undefined) : nextTurn());
    }
    if (signal.aborted) return;
    yield { type: 'finish', finishReason };
  }
}

export function composeReply(messages: ChatMessage[]): string {
  const last = [...messages].reverse().find((m) => !isInstruction(m)) ?? messages.at(-1);
  const prompt = contentText(last?.content);
  const seed = createHash('sha256').update(prompt).digest();
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
