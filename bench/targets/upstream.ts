/**
 * Target C: a zero-latency OpenAI-compatible upstream, `POST /v1/chat/completions` only. The reply has
 * `max_tokens` tokens (16 when absent), streamed as chunks of TOKENS_PER_CHUNK tokens: the bench's chat
 * requests (50 tokens) get a few content chunks, and a long stream is asked for with a large `max_tokens`.
 * `GET /stats` counts the completions served, so the bench can check that a proxy really reached it.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { announce } from './announce';
import { TOKENS_PER_CHUNK } from './upstream-shape';

const DEFAULT_MAX_TOKENS = 16;
const PROMPT_TOKENS = 12;
const CHUNK_TEXT = 'lorem ipsum dolor sit amet consectetur adipiscing elit sed do ';

interface ChatRequest {
  model?: string;
  stream?: boolean;
  max_tokens?: number;
  stream_options?: { include_usage?: boolean };
}

async function readJson(req: IncomingMessage): Promise<ChatRequest> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  return JSON.parse(Buffer.concat(parts).toString('utf8')) as ChatRequest;
}

function reply(request: ChatRequest) {
  const tokens = request.max_tokens ?? DEFAULT_MAX_TOKENS;
  return {
    id: `chatcmpl-bench${Date.now()}`,
    created: Math.floor(Date.now() / 1000),
    model: request.model ?? 'bench-model',
    chunks: Math.ceil(tokens / TOKENS_PER_CHUNK),
    usage: { prompt_tokens: PROMPT_TOKENS, completion_tokens: tokens, total_tokens: PROMPT_TOKENS + tokens },
  };
}

function sendJson(res: ServerResponse, request: ChatRequest) {
  const r = reply(request);
  const body = JSON.stringify({
    id: r.id,
    object: 'chat.completion',
    created: r.created,
    model: r.model,
    choices: [{ index: 0, message: { role: 'assistant', content: CHUNK_TEXT.repeat(r.chunks) }, finish_reason: 'stop' }],
    usage: r.usage,
  });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** Writes every chunk at once, waiting only when the socket pushes back, so the reader sets the pace. */
async function sendStream(res: ServerResponse, request: ChatRequest) {
  const r = reply(request);
  const chunk = (choices: unknown[], usage?: unknown) =>
    `data: ${JSON.stringify({ id: r.id, object: 'chat.completion.chunk', created: r.created, model: r.model, choices, ...(usage ? { usage } : {}) })}\n\n`;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  const write = async (text: string) => {
    if (!res.write(text)) await new Promise((resolve) => res.once('drain', resolve));
  };
  await write(chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]));
  for (let i = 0; i < r.chunks; i++) await write(chunk([{ index: 0, delta: { content: CHUNK_TEXT }, finish_reason: null }]));
  await write(chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]));
  if (request.stream_options?.include_usage) await write(chunk([], r.usage));
  res.end('data: [DONE]\n\n');
}

let served = 0;

announce(
  createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/stats') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ requests: served }));
      return;
    }
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not found"}}');
      return;
    }
    served++;
    readJson(req)
      .then((request) => (request.stream ? sendStream(res, request) : sendJson(res, request)))
      .catch(() => {
        if (!res.headersSent) res.writeHead(400, { 'content-type': 'application/json' });
        res.end('{"error":{"message":"bad request"}}');
      });
  }),
);
