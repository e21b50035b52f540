import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** How an operation started from now on ends. */
export type VeoOutcome =
  | { kind: 'video'; polls: number }
  | { kind: 'failed'; polls: number; code: number; message: string }
  | { kind: 'filtered'; polls: number; reasons: readonly string[] }
  | { kind: 'never' };

/** One scripted answer in place of the real one, for the next request of a kind. */
export type VeoFault =
  | { kind: 'status'; status: number; statusText: string; message: string; retryAfter?: string; retryDelay?: string }
  | { kind: 'malformed' }
  /** JSON, but not the documented shape (a misrouted proxy, say). */
  | { kind: 'json'; body: unknown }
  | { kind: 'hang' };

export type VeoRoute = 'submit' | 'poll' | 'download';

export interface RecordedRequest {
  method: string;
  path: string;
  query: string;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}

interface Operation {
  name: string;
  outcome: VeoOutcome;
  polled: number;
  fileId: string;
}

/**
 * A local stand-in for the Gemini API's Veo endpoints, as @google/genai called them and Google documents them
 * (https://ai.google.dev/gemini-api/docs/veo, REST tab): `POST /v1beta/models/{model}:predictLongRunning`
 * answering `{ name }`, `GET /v1beta/{name}` answering the operation (`done` absent while running, then `error` or
 * `response.generateVideoResponse`), and `GET /v1beta/files/{id}:download?alt=media` serving the MP4. Errors use
 * Google's `{ error: { code, message, status, details } }`; a wrong key is a 400 with ErrorInfo API_KEY_INVALID
 * and, as Google's DebugInfo does, quotes the key it was sent. An image to start from is `instances[0].image`
 * `{ bytesBase64Encoded, mimeType }` (the Gemini API form @google/genai builds: imageToMldev); anything else there
 * is a 400 INVALID_ARGUMENT.
 */
export async function startFakeGeminiVeo(apiKey: string, video: Buffer) {
  const operations = new Map<string, Operation>();
  const requests: RecordedRequest[] = [];
  const faults: Record<VeoRoute, VeoFault[]> = { submit: [], poll: [], download: [] };
  let outcome: VeoOutcome = { kind: 'video', polls: 2 };
  let next = 1;

  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8', ...headers });
    res.end(JSON.stringify(body));
  };
  const googleError = (code: number, status: string, message: string, details: unknown[] = []) => ({
    error: { code, message, status, details },
  });

  const applyFault = (res: ServerResponse, fault: VeoFault): void => {
    if (fault.kind === 'hang') return;
    if (fault.kind === 'json') return send(res, 200, fault.body);
    if (fault.kind === 'malformed') {
      res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' });
      res.end('<html>Service temporarily unavailable</html>');
      return;
    }
    const details = fault.retryDelay ? [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: fault.retryDelay }] : [];
    send(res, fault.status, googleError(fault.status, fault.statusText, fault.message, details), fault.retryAfter ? { 'retry-after': fault.retryAfter } : {});
  };

  const operationBody = (op: Operation, origin: string) => {
    const running = op.outcome.kind === 'never' || op.polled <= op.outcome.polls;
    if (running) return { name: op.name };
    switch (op.outcome.kind) {
      case 'failed':
        return { name: op.name, done: true, error: { code: op.outcome.code, message: op.outcome.message } };
      case 'filtered':
        return {
          name: op.name,
          done: true,
          response: {
            '@type': 'type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse',
            generateVideoResponse: { raiMediaFilteredCount: op.outcome.reasons.length, raiMediaFilteredReasons: op.outcome.reasons },
          },
        };
      default:
        return {
          name: op.name,
          done: true,
          response: {
            '@type': 'type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse',
            generateVideoResponse: { generatedSamples: [{ video: { uri: `${origin}/v1beta/files/${op.fileId}:download?alt=media` } }] },
          },
        };
    }
  };

  const readJson = async (req: IncomingMessage): Promise<unknown> => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    return text ? JSON.parse(text) : undefined;
  };

  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    const body = req.method === 'POST' ? await readJson(req) : undefined;
    requests.push({ method: req.method ?? '', path: url.pathname, query: url.search, headers: req.headers, body });
    const origin = `http://${req.headers.host}`;

    const presented = req.headers['x-goog-api-key'];
    if (presented !== apiKey) {
      return send(
        res,
        400,
        googleError(400, 'INVALID_ARGUMENT', 'API key not valid. Please pass a valid API key.', [
          { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com' },
          { '@type': 'type.googleapis.com/google.rpc.DebugInfo', detail: `Invalid API key: ${String(presented)}` },
        ]),
      );
    }

    const submit = req.method === 'POST' ? /^\/v1beta\/models\/([^/:]+):predictLongRunning$/.exec(url.pathname) : null;
    const poll = req.method === 'GET' ? /^\/v1beta\/(models\/[^/]+\/operations\/[^/]+)$/.exec(url.pathname) : null;
    const download = req.method === 'GET' ? /^\/v1beta\/files\/([a-z0-9]+):download$/.exec(url.pathname) : null;
    const route: VeoRoute | undefined = submit ? 'submit' : poll ? 'poll' : download ? 'download' : undefined;
    const fault = route && faults[route].shift();
    if (fault) return applyFault(res, fault);

    const image = submit ? (body as { instances?: { image?: unknown }[] } | undefined)?.instances?.[0]?.image : undefined;
    if (image !== undefined && !isInlineImage(image)) {
      return send(res, 400, googleError(400, 'INVALID_ARGUMENT', 'Invalid value at instances[0].image: bytesBase64Encoded and mimeType (image/png or image/jpeg) are required.'));
    }
    if (submit) {
      const n = next++;
      const op: Operation = { name: `models/${submit[1]}/operations/op${n}`, outcome, polled: 0, fileId: `file${n}` };
      operations.set(op.name, op);
      return send(res, 200, { name: op.name });
    }
    const op = poll && operations.get(poll[1]!);
    if (op) {
      op.polled++;
      return send(res, 200, operationBody(op, origin));
    }
    const file = download && [...operations.values()].find((o) => o.fileId === download[1] && o.outcome.kind === 'video');
    if (file && url.searchParams.get('alt') === 'media') {
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': String(video.length) });
      return res.end(video);
    }
    send(res, 404, googleError(404, 'NOT_FOUND', `Requested entity was not found.`));
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    /** What GEMINI_BASE_URL names in production: the origin, without the API version. */
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    /** How operations submitted from now on end. */
    setOutcome(value: VeoOutcome) {
      outcome = value;
    },
    /** The next request of this kind gets `fault` instead of its answer. */
    fail(route: VeoRoute, fault: VeoFault) {
      faults[route].push(fault);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export type FakeGeminiVeo = Awaited<ReturnType<typeof startFakeGeminiVeo>>;

function isInlineImage(image: unknown): boolean {
  const { bytesBase64Encoded: data, mimeType } = (image ?? {}) as { bytesBase64Encoded?: unknown; mimeType?: unknown };
  return typeof data === 'string' && data.length > 0 && /^[A-Za-z0-9+/]+={0,2}$/.test(data) && (mimeType === 'image/png' || mimeType === 'image/jpeg');
}
