import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the fake does with one request: plays `script` as an OpenAI-style event stream. */
export type Step =
  /** `index`: the choice (0 when absent); `logprobs`: OpenAI's entries for this text. */
  | { content: string; index?: number; logprobs?: unknown[] }
  /** A tool-call delta as OpenAI streams it: the first of a call with `id` and `name`, then argument fragments. */
  | { toolCall: { index?: number; call: number; id?: string; name?: string; arguments: string } }
  | { finish: 'stop' | 'length' | 'tool_calls' | 'content_filter'; index?: number }
  | { usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } }
  | { error: string }
  /** Waits until the test lets the stream go on. */
  | { gate: Promise<void> }
  | { drop: true };

export interface FakeUpstream {
  baseUrl: string;
  /** Request bodies received, in order. */
  requests: any[];
  /** Authorization headers received, in order. */
  authorizations: Array<string | undefined>;
  /** Requests whose client went away before the stream ended. */
  abandoned: number;
  /** Answer the next requests with this status instead of a stream. */
  failWith: number | undefined;
  script: Step[];
  close(): Promise<void>;
}

/** The script as one chat.completion body, for a request that did not ask for a stream. */
async function answerWhole(res: ServerResponse, script: Step[]): Promise<void> {
  type Choice = { content: string | null; tool_calls: any[]; logprobs: unknown[] | null; finish: string | null };
  const choices: Choice[] = [];
  const choice = (index = 0) => (choices[index] ??= { content: null, tool_calls: [], logprobs: null, finish: null });
  let usage: object | undefined;
  for (const step of script) {
    if ('content' in step) {
      const c = choice(step.index);
      c.content = (c.content ?? '') + step.content;
      if (step.logprobs) c.logprobs = [...(c.logprobs ?? []), ...step.logprobs];
    } else if ('toolCall' in step) {
      const { index, call, id, name, arguments: args } = step.toolCall;
      const calls = choice(index).tool_calls;
      if (calls[call]) calls[call].function.arguments += args;
      else calls[call] = { id, type: 'function', function: { name, arguments: args } };
    } else if ('finish' in step) choice(step.index).finish = step.finish;
    else if ('usage' in step) usage = step.usage;
    else if ('gate' in step) await step.gate;
    else if ('error' in step) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: step.error } }));
      return;
    } else {
      res.destroy();
      return;
    }
  }
  const body = {
    id: 'up-1',
    object: 'chat.completion',
    choices: choices.map((c, index) => ({
      index,
      message: { role: 'assistant', content: c.content ?? (c.tool_calls.length > 0 ? null : ''), ...(c.tool_calls.length > 0 ? { tool_calls: c.tool_calls } : {}) },
      logprobs: c.logprobs && { content: c.logprobs, refusal: null },
      finish_reason: c.finish,
    })),
    usage,
  };
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

/** A local OpenAI-compatible Chat Completions server, streaming (or answering in one body) whatever the test scripts. */
export async function startFakeUpstream(): Promise<FakeUpstream> {
  const fake: FakeUpstream = {
    baseUrl: '',
    requests: [],
    authorizations: [],
    abandoned: 0,
    failWith: undefined,
    script: [],
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    for await (const part of req) raw += part;
    fake.requests.push(JSON.parse(raw));
    fake.authorizations.push(req.headers.authorization);
    if (fake.failWith) {
      res.writeHead(fake.failWith, { 'content-type': 'application/json' }).end('{"error":{"message":"upstream is down"}}');
      return;
    }
    let ended = false;
    res.on('close', () => {
      if (!ended) fake.abandoned++;
    });
    if (!fake.requests.at(-1).stream) return answerWhole(res, fake.script).then(() => void (ended = true));
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const chunk = (body: object) => res.write(`data: ${JSON.stringify({ id: 'up-1', object: 'chat.completion.chunk', ...body })}\n\n`);
    chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
    for (const step of fake.script) {
      if ('content' in step) {
        const logprobs = step.logprobs ? { logprobs: { content: step.logprobs, refusal: null } } : {};
        chunk({ choices: [{ index: step.index ?? 0, delta: { content: step.content }, ...logprobs, finish_reason: null }] });
      } else if ('toolCall' in step) {
        const { index, call, id, name, arguments: args } = step.toolCall;
        const opening = id ? { id, type: 'function' } : {};
        const fn = name ? { name, arguments: args } : { arguments: args };
        chunk({ choices: [{ index: index ?? 0, delta: { tool_calls: [{ index: call, ...opening, function: fn }] }, finish_reason: null }] });
      } else if ('finish' in step) chunk({ choices: [{ index: step.index ?? 0, delta: {}, finish_reason: step.finish }] });
      else if ('usage' in step) chunk({ choices: [], usage: step.usage });
      else if ('error' in step) res.write(`data: ${JSON.stringify({ error: { message: step.error } })}\n\n`);
      else if ('gate' in step) await step.gate;
      else {
        res.destroy();
        return;
      }
    }
    res.write('data: [DONE]\n\n');
    ended = true;
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return fake;
}
