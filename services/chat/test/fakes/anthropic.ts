import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local stand-in for Anthropic's Messages API (`POST /v1/messages`, API version 2026-10-21), answering what
 * the test scripts: a JSON Message, or with `"stream": true` the named server-sent events of Anthropic's
 * streaming guide, and errors in the shape of its errors reference, `{type: 'error', error: {type, message}}`.
 */

export interface FakeUsage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens?: number;
  cache_read_input_tokens?: number;
}

export interface FakeAnswer {
  /** The text, as the deltas of one text block; a whole answer carries them joined. */
  text: string[];
  /** A pause before each text delta of a stream: the provider slow but alive. */
  gapMs?: number;
  /** A thinking block ahead of the text, as models that think send one. */
  thinking?: string;
  /**
   * Tool calls after the text, as `tool_use` blocks; a stream sends each input as `json` (the `input_json_delta`
   * fragments, default: the input's JSON in one).
   */
  toolUses?: Array<{ id: string; name: string; input: Record<string, unknown>; json?: string[] }>;
  stopReason: string;
  stopDetails?: { type: 'refusal'; category: string | null; explanation: string | null };
  usage: FakeUsage;
  /**
   * How the answer goes wrong after its text. `cut`: the connection drops; `garbled`: an event (or the body) that
   * is not JSON; `hang`: nothing more is sent. Only a stream can end without `message_stop` or carry an `error` event.
   */
  fault?: 'cut' | 'garbled' | 'hang' | 'no_message_stop' | { errorEvent: string };
}

export type FakeReply =
  | { answer: FakeAnswer }
  | { status: number; errorType: string; message: string; headers?: Record<string, string> }
  /** The request is read, and never answered. */
  | { silence: true };

export interface RecordedRequest {
  method: string | undefined;
  path: string | undefined;
  headers: IncomingHttpHeaders;
  body: any;
}

export interface FakeAnthropic {
  /** What the SDK calls `baseURL`: the origin, without `/v1`. */
  baseUrl: string;
  requests: RecordedRequest[];
  /** What the next requests get. */
  reply: FakeReply;
  /** Resolves when a client goes away before its answer was complete. */
  nextAbandon(): Promise<void>;
  close(): Promise<void>;
}

const MODEL = 'claude-haiku-5-5';

export async function startFakeAnthropic(): Promise<FakeAnthropic> {
  const abandoned: Array<() => void> = [];
  const fake: FakeAnthropic = {
    baseUrl: '',
    requests: [],
    reply: { silence: true },
    nextAbandon: () => new Promise((resolve) => abandoned.push(resolve)),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server = createServer(async (req, res) => {
    let raw = '';
    for await (const part of req) raw += part;
    const body = raw ? JSON.parse(raw) : undefined;
    fake.requests.push({ method: req.method, path: req.url, headers: req.headers, body });
    res.on('close', () => {
      if (!res.writableFinished) for (const resolve of abandoned.splice(0)) resolve();
    });
    await answer(req, res, body, fake.reply);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}

/** Plays `reply`. */
async function answer(req: IncomingMessage, res: ServerResponse, body: any, reply: FakeReply): Promise<void> {
  if (req.method !== 'POST' || req.url !== '/v1/messages') return error(res, 404, 'not_found_error', `Not found: ${req.url}`);
  const invalid = unansweredToolUse(body?.messages ?? []);
  if (invalid) return error(res, 400, 'invalid_request_error', invalid);
  if ('silence' in reply) return;
  if ('status' in reply) return error(res, reply.status, reply.errorType, reply.message, reply.headers);
  return body?.stream === true ? stream(res, reply.answer) : whole(res, reply.answer);
}

/**
 * The rule the API enforces on tool use: "Each `tool_use` block must have a corresponding `tool_result` block in the
 * next message", the results first in that user message.
 */
function unansweredToolUse(messages: Array<{ role: string; content: unknown }>): string | undefined {
  for (const [i, message] of messages.entries()) {
    const blocks = (content: unknown): any[] => (Array.isArray(content) ? content : []);
    const ids = blocks(message.content).flatMap((b) => (b.type === 'tool_use' ? [b.id] : []));
    if (message.role !== 'assistant' || ids.length === 0) continue;
    const next = messages[i + 1];
    const results = blocks(next?.content);
    const answered = results.slice(0, ids.length).map((b) => (b.type === 'tool_result' ? b.tool_use_id : undefined));
    if (next?.role !== 'user' || ids.some((id) => !answered.includes(id))) {
      return `messages.${i}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after`;
    }
  }
  return undefined;
}

function error(res: ServerResponse, status: number, type: string, message: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', 'request-id': 'req_fake_1', ...headers });
  res.end(JSON.stringify({ type: 'error', error: { type, message }, request_id: 'req_fake_1' }));
}

/** Drops the connection once `last` (and all before it) has gone out, so that the client has what came first. */
async function cut(res: ServerResponse, last: string): Promise<void> {
  await new Promise((resolve) => res.write(last, resolve));
  res.destroy();
}

async function whole(res: ServerResponse, answer: FakeAnswer): Promise<void> {
  const { fault } = answer;
  if (fault === 'no_message_stop' || typeof fault === 'object') return error(res, 500, 'api_error', 'fake: that fault exists only in a stream');
  res.writeHead(200, { 'content-type': 'application/json', 'request-id': 'req_fake_1' });
  const json = JSON.stringify(message(answer.stopReason, answer.stopDetails, answer.usage, [...thinkingBlock(answer), ...textBlocks(answer), ...toolUseBlocks(answer)]));
  if (fault === 'hang') {
    res.flushHeaders();
    return;
  }
  if (fault === 'cut') return cut(res, json.slice(0, 40));
  res.end(fault === 'garbled' ? json.slice(0, 40) : json);
}

function message(stopReason: string | null, stopDetails: FakeAnswer['stopDetails'], usage: FakeUsage, content: object[]) {
  return {
    id: 'msg_fake_1',
    type: 'message',
    role: 'assistant',
    model: MODEL,
    content,
    stop_reason: stopReason,
    stop_sequence: null,
    stop_details: stopDetails ?? null,
    usage: { cache_creation_input_tokens: null, cache_read_input_tokens: null, ...usage },
  };
}

const thinkingBlock = (answer: FakeAnswer) => (answer.thinking === undefined ? [] : [{ type: 'thinking', thinking: answer.thinking, signature: 'sig' }]);
/** An answer of only tool calls has no text block. */
const textBlocks = (answer: FakeAnswer) => (answer.text.length === 0 ? [] : [{ type: 'text', text: answer.text.join(''), citations: null }]);
const toolUseBlocks = (answer: FakeAnswer) =>
  (answer.toolUses ?? []).map(({ id, name, input }) => ({ type: 'tool_use', id, name, input, caller: { type: 'direct' } }));

/** The documented event flow: message_start, content blocks (start, deltas, stop), message_delta, message_stop. */
async function stream(res: ServerResponse, answer: FakeAnswer): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'request-id': 'req_fake_1' });
  const send = (type: string, data: object) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  // message_start has the input counts and a first output count; message_delta's cumulative counts replace those
  // it has (here only output_tokens: the others are null, "not applicable").
  const { output_tokens, ...input } = answer.usage;
  send('message_start', { message: message(null, undefined, { ...input, output_tokens: 1 }, []) });
  let index = 0;
  if (answer.thinking !== undefined) {
    send('content_block_start', { index, content_block: { type: 'thinking', thinking: '', signature: '' } });
    send('content_block_delta', { index, delta: { type: 'thinking_delta', thinking: answer.thinking } });
    send('content_block_delta', { index, delta: { type: 'signature_delta', signature: 'sig' } });
    send('content_block_stop', { index });
    index++;
  }
  send('ping', {});
  if (answer.text.length > 0) {
    send('content_block_start', { index, content_block: { type: 'text', text: '', citations: null } });
    for (const text of answer.text) {
      if (answer.gapMs) await new Promise((resolve) => setTimeout(resolve, answer.gapMs));
      send('content_block_delta', { index, delta: { type: 'text_delta', text } });
    }
  }
  const { fault } = answer;
  if (fault === 'hang') return;
  if (fault === 'cut') return cut(res, ': the connection drops here\n\n');
  if (fault === 'garbled') return void res.end('event: content_block_delta\ndata: {"type":"content_block_delta","index":\n\n');
  if (typeof fault === 'object') return void res.end(`event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: fault.errorEvent, message: 'Overloaded' } })}\n\n`);
  if (answer.text.length > 0) send('content_block_stop', { index: index++ });
  for (const use of answer.toolUses ?? []) {
    // The block starts with an empty input; its JSON text follows in fragments.
    send('content_block_start', { index, content_block: { type: 'tool_use', id: use.id, name: use.name, input: {}, caller: { type: 'direct' } } });
    for (const partial_json of use.json ?? [JSON.stringify(use.input)]) send('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json } });
    send('content_block_stop', { index: index++ });
  }
  const delta = { stop_reason: answer.stopReason, stop_sequence: null, stop_details: answer.stopDetails ?? null, container: null };
  send('message_delta', { delta, usage: { input_tokens: null, cache_creation_input_tokens: null, cache_read_input_tokens: null, output_tokens } });
  if (fault !== 'no_message_stop') send('message_stop', {});
  res.end();
}
