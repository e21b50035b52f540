import { describe, expect, it } from 'vitest';
import { composeReply, SimulatorProvider } from '../src/adapters/simulator';
import { gptTokenizer } from '../src/adapters/tokenizer';
import type { GenerationEvent, GenerationRequest } from '../src/application/ports';

const simulator = new SimulatorProvider({ tokenizer: gptTokenizer, wordDelayMs: 0 });
const request = (over: Partial<GenerationRequest> = {}): GenerationRequest => ({
  messages: [{ role: 'user', content: 'How do rivers shape valleys over time?' }],
  maxTokens: 500,
  temperature: 1,
  stop: [],
  stream: true,
  ...over,
});
const run = async (req: GenerationRequest, signal = new AbortController().signal) => {
  const events: GenerationEvent[] = [];
  for await (const event of simulator.generate(req, signal)) events.push(event);
  const text = events.flatMap((e) => (e.type === 'content' ? [e.text] : [])).join('');
  return { events, text, finish: events.at(-1) };
};

describe('simulator', () => {
  it('builds the same fluent reply from the same prompt, about the prompt', async () => {
    const reply = composeReply(request().messages);
    expect(reply).toBe(composeReply(request().messages));
    expect(reply).toMatch(/rivers|valleys/);
    expect(reply).toMatch(/\.$/);
    expect(composeReply([{ role: 'user', content: 'Tell me about bread baking' }])).not.toBe(reply);
  });

  it('streams the reply word by word and finishes with stop', async () => {
    const { events, text, finish } = await run(request());
    expect(text).toBe(composeReply(request().messages));
    expect(events.filter((e) => e.type === 'content').length).toBe(text.split(' ').length);
    expect(finish).toEqual({ type: 'finish', index: 0, finishReason: 'stop' });
  });

  it('stops within max_tokens with finish reason length', async () => {
    const { text, finish } = await run(request({ maxTokens: 6 }));
    expect(gptTokenizer.count(text)).toBeLessThanOrEqual(6);
    expect(gptTokenizer.count(text)).toBeGreaterThan(3);
    expect(finish).toEqual({ type: 'finish', index: 0, finishReason: 'length' });
  });

  it('cuts the reply before the first stop sequence', async () => {
    const full = composeReply(request().messages);
    const stop = full.split(' ')[4]!;
    const { text, finish } = await run(request({ stop: ['zzz-never', stop] }));
    expect(text).toBe(full.slice(0, full.indexOf(stop)));
    expect(finish).toEqual({ type: 'finish', index: 0, finishReason: 'stop' });
  });

  it('names the leading theory corner when the instruction is present', () => {
    const reply = composeReply([
      { role: 'system', content: 'Steer the emphasis of your reply by this blend of theories of change: theurgism (faith-based activism) 100%.' },
      { role: 'user', content: 'Where do I begin?' },
    ]);
    expect(reply).toContain('Leaning towards theurgism (faith-based activism)');
  });

  it('stops when aborted, without finishing', async () => {
    const abort = new AbortController();
    const events: GenerationEvent[] = [];
    for await (const event of simulator.generate(request(), abort.signal)) {
      events.push(event);
      if (events.length === 2) abort.abort();
    }
    expect(events).toHaveLength(2);
    expect(events.every((e) => e.type === 'content')).toBe(true);
  });
});
