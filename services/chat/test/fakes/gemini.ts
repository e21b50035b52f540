import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local Gemini API: `POST /v1beta/models/{model}:generateContent` answers one GenerateContentResponse body,
 * `:streamGenerateContent?alt=sse` the same answer as server-sent events, one chunk per `text` step
 * (ai.google.dev/api/generate-content). Each request plays `script`, or fails with `failure` when one is set.
 */
export type Step =
  /** Text of candidate `candidate` (0 when absent; more than one when the request asks `candidateCount`). */
  | { text: string; candidate?: number }
  /**
   * A function call, whole (the Gemini API streams no partial arguments), as a part of its own; the first of a
   * candidate carries a thought signature, as Gemini 3 models send one.
   */
  | { call: { name: string; args: Record<string, unknown>; id?: string }; candidate?: number }
  /** Ends the candidate with this `finishReason` (STOP, MAX_TOKENS, SAFETY, ...); CONTINUATION comes with a token. */
  | { finish: string; continuationToken?: string; candidate?: number }
  /** The running usage so far, as Google sends it on a chunk. */
  | { usage: UsageMetadata }
  /** Refuses the prompt: `promptFeedback.blockReason`, and no candidates. */
  | { blocked: string }
  /** Waits until the test lets the answer go on. */
  | { gate: Promise<void> }
  /** An error event inside the stream, as Google sends one after the status line has gone out as 200. */
  | { error: Failure['error'] }
  /** Drops the connection. */
  | { cut: true }
  /** Sends a chunk that is not JSON. */
  | { garbage: true }
  /** Sends nothing more and never ends. */
  | { hang: true };

export interface UsageMetadata {
  promptTokenCount?: number;
  candidatesTokenCount?: number;
  thoughtsTokenCount?: number;
  totalTokenCount?: number;
}

/** An HTTP error with Google's body `{error: {code, message, status, details}}`. */
export interface Failure {
  status: number;
  error: { code: number; message: string; status: string; details?: unknown[] };
  headers?: Record<string, string>;
}

export interface RecordedRequest {
  method: string;
  /** Path and query, e.g. `/v1beta/models/m:streamGenerateContent?alt=sse`. */
  url: string;
  headers: IncomingMessage['headers'];
  body: any;
}

export interface FakeGemini {
  /** What goes in the SDK's `httpOptions.baseUrl`. */
  baseUrl: string;
  requests: RecordedRequest[];
  script: Step[];
  failure: Failure | undefined;
  /** Resolves when a client next goes away before its answer ended. */
  nextAbandoned(): Promise<void>;
  close(): Promise<void>;
}

const ROUTE = /^\/v1beta\/models\/([^/:?]+):(generateContent|streamGenerateContent)(\?.*)?$/;

export function googleError(status: number, grpcStatus: string, message: string, details?: unknown[]): Failure {
  return { status, error: { code: status, message, status: grpcStatus, ...(details ? { details } : {}) } };
}

export async function startFakeGemini(): Promise<FakeGemini> {
  const open = new Set<ServerResponse>();
  const abandoned: Array<() => void> = [];
  const fake: FakeGemini = {
    baseUrl: '',
    requests: [],
    script: [],
    failure: undefined,
    nextAbandoned: () => new Promise((resolve) => abandoned.push(resolve)),
    close: () =>
      new Promise((resolve) => {
        for (const res of open) res.destroy();
        server.close(() => resolve());
      }),
  };

  const server = createServer(async (req, res) => {
    const route = ROUTE.exec(req.url ?? '');
    const body = await readJson(req);
    fake.requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
    open.add(res);
    res.on('close', () => {
      open.delete(res);
      if (!res.writableFinished) for (const resolve of abandoned.splice(0)) resolve();
    });
    if (req.method !== 'POST' || !route) return fail(res, googleError(404, 'NOT_FOUND', `no route ${req.url}`));
    if (fake.failure) return fail(res, fake.failure);
    const invalid = unsigned(body);
    if (invalid) return fail(res, googleError(400, 'INVALID_ARGUMENT', invalid));
    if (route[2] === 'generateContent') return whole(res, fake.script, route[1] ?? '');
    // Without `alt=sse` Google streams one JSON array instead, which the SDK never asks for.
    if (new URLSearchParams(route[3] ?? '').get('alt') !== 'sse') return fail(res, googleError(400, 'INVALID_ARGUMENT', 'this fake streams SSE only'));
    await stream(res, fake.script, route[1] ?? '');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  let text = '';
  for await (const chunk of req) text += chunk;
  return text ? JSON.parse(text) : undefined;
}

function fail(res: ServerResponse, failure: Failure): void {
  res
    .writeHead(failure.status, { 'content-type': 'application/json; charset=UTF-8', ...failure.headers })
    .end(JSON.stringify({ error: failure.error }));
}

/**
 * Gemini 3's rule on replayed function calls: "Function call is missing a thought_signature in functionCall parts"
 * (400) when the first call of a model turn has no signature (ai.google.dev/gemini-api/docs/thought-signatures).
 */
function unsigned(body: any): string | undefined {
  for (const [i, content] of (body?.contents ?? []).entries()) {
    const first = (content.parts ?? []).find((part: any) => part.functionCall);
    if (content.role === 'model' && first && !first.thoughtSignature) {
      return `Function call is missing a thought_signature in functionCall parts. Additional data, function call \`default_api:${first.functionCall.name}\`, position ${i}.`;
    }
  }
  return undefined;
}

/** One candidate of a response: its parts so far, and how it ended. */
interface Candidate {
  parts: object[];
  finishReason?: string;
  continuationToken?: string;
}

/** One GenerateContentResponse being built; what a `text` or `call` step starts and later steps add to. */
class Chunk {
  readonly candidates = new Map<number, Candidate>();
  usage: UsageMetadata | undefined;
  blockReason: string | undefined;
  /** Candidates whose first call has gone out (in this answer), so later ones carry no signature. */
  constructor(private readonly signed = new Set<number>()) {}

  candidate(index = 0): Candidate {
    let candidate = this.candidates.get(index);
    if (!candidate) this.candidates.set(index, (candidate = { parts: [] }));
    return candidate;
  }

  add(step: Step): void {
    if ('text' in step) {
      const parts = this.candidate(step.candidate).parts as Array<{ text?: string }>;
      const last = parts.at(-1);
      if (last?.text !== undefined) last.text += step.text;
      else parts.push({ text: step.text });
    } else if ('call' in step) {
      const index = step.candidate ?? 0;
      const signature = this.signed.has(index) ? {} : { thoughtSignature: 'c2lnbmF0dXJl' };
      this.signed.add(index);
      this.candidate(index).parts.push({ functionCall: step.call, ...signature });
    } else if ('finish' in step) {
      const candidate = this.candidate(step.candidate);
      candidate.finishReason = step.finish;
      candidate.continuationToken = step.continuationToken;
    } else if ('usage' in step) this.usage = step.usage;
    else if ('blocked' in step) this.blockReason = step.blocked;
  }

  json(model: string): object {
    const candidates = [...this.candidates].map(([index, c]) => ({
      ...(c.parts.length > 0 ? { content: { parts: c.parts, role: 'model' } } : {}),
      ...(c.finishReason ? { finishReason: c.finishReason } : {}),
      ...(c.continuationToken ? { continuationToken: c.continuationToken } : {}),
      index,
    }));
    return {
      ...(this.blockReason ? { promptFeedback: { blockReason: this.blockReason } } : { candidates }),
      ...(this.usage ? { usageMetadata: this.usage } : {}),
      modelVersion: model,
      responseId: 'fake-response',
    };
  }
}

/** Server-sent events as Google frames them: `data: {json}` and a blank line, CRLF. */
async function stream(res: ServerResponse, script: Step[], model: string): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  let pending: Chunk | undefined;
  const signed = new Set<number>();
  // Resolves once the chunk is handed to the socket, so that a cut after it comes after it on the wire too.
  const flush = async () => {
    const chunk = pending;
    pending = undefined;
    if (chunk) await new Promise<void>((resolve) => res.write(`data: ${JSON.stringify(chunk.json(model))}\r\n\r\n`, () => resolve()));
  };
  for (const step of script) {
    if ('text' in step || 'call' in step) {
      await flush();
      pending = new Chunk(signed);
      pending.add(step);
    } else if ('finish' in step || 'usage' in step || 'blocked' in step) {
      (pending ??= new Chunk(signed)).add(step);
    } else {
      await flush();
      if ('gate' in step) await step.gate;
      else if ('error' in step) return void res.end(`data: ${JSON.stringify({ error: step.error })}\r\n\r\n`);
      else if ('cut' in step) return void res.destroy();
      else if ('garbage' in step) res.write('data: {"candidates": [{"content": \r\n\r\n');
      else return;
    }
  }
  await flush();
  res.end();
}

/** The whole answer as one GenerateContentResponse. */
async function whole(res: ServerResponse, script: Step[], model: string): Promise<void> {
  const answer = new Chunk();
  for (const step of script) {
    if ('gate' in step) await step.gate;
    else if ('cut' in step) return void res.destroy();
    else if ('garbage' in step) return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"candidates": [');
    else if ('error' in step) return fail(res, { status: step.error.code, error: step.error });
    else if ('hang' in step) return;
    else answer.add(step);
  }
  res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' }).end(JSON.stringify(answer.json(model)));
}
