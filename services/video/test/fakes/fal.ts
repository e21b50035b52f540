import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One HTTP request as the fake received it. */
export interface FalRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: unknown;
}

/**
 * How a submitted request plays out: completes after answering `completeAfterPolls` status calls as queued, then
 * running (its result names the fake's MP4); or completes at once and its result answers an error, which is how fal
 * reports a failed generation; or never leaves the queue and the runner.
 */
export type FalOutcome = { completeAfterPolls: number } | { failWith: FalAnswer } | 'never';

/** An answer fal gives in place of the usual one: an error status, a body that is not JSON, or no answer at all. */
export type FalAnswer = { status: number; body: unknown; headers?: Record<string, string> } | 'unparsable' | 'hang';

export type FalRoute = 'submit' | 'status' | 'result' | 'file';

interface QueuedRequest {
  app: string;
  outcome: FalOutcome;
  polls: number;
}

/**
 * A local stand-in for fal's queue API (its "Queue" and "Inference API" docs), as @fal-ai/client 1.10.1 calls
 * it: `POST /{endpoint id}` submits (the endpoint id may have a path: `fal-ai/veo3.1/fast`), while
 * `GET /{owner}/{app}/requests/{id}/status` and `GET /{owner}/{app}/requests/{id}` use the owner and app only.
 * Status answers 202 while the request is queued or running and 200 once completed; the result answers the model's
 * output, or the model's error with its status. Generated files are served from `/files/`, standing in for fal's CDN,
 * which takes no key. Every call but the file's needs `Authorization: Key <key>`. An `image-to-video` endpoint
 * requires `image_url` (its input schema in @fal-ai/client's endpoint types), a URL or a data URI (fal's CDN
 * docs); without one it answers fal's 422 validation error.
 */
export async function startFakeFal(apiKey: string, video: Buffer) {
  const requests: FalRequest[] = [];
  const queued = new Map<string, QueuedRequest>();
  const interruptions = new Map<FalRoute, FalAnswer>();
  let nextOutcome: FalOutcome = { completeAfterPolls: 2 };
  let next = 1;

  const readBody = async (req: IncomingMessage): Promise<unknown> => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    return text ? (JSON.parse(text) as unknown) : undefined;
  };

  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://fal.fake');
    const method = req.method ?? '';
    const body = await readBody(req);
    requests.push({ method, path: url.pathname, headers: req.headers, body });
    const origin = `http://${req.headers.host}`;
    const route = routeOf(method, url.pathname);
    const interruption = route && interruptions.get(route);
    if (route && interruption) {
      interruptions.delete(route);
      return answer(res, interruption);
    }
    if (route === 'file') return send(res, 200, video, { 'content-type': 'video/mp4' });
    if (req.headers.authorization !== `Key ${apiKey}`) {
      // fal's request-error shape (its "Request Errors" docs), a flat `detail` string; the wording is ours.
      return send(res, 401, { detail: 'Invalid API key' });
    }
    if (route === 'submit' && url.pathname.endsWith('/image-to-video') && !isFileInput((body as { image_url?: unknown } | undefined)?.image_url)) {
      return send(res, 422, { detail: [{ loc: ['body', 'image_url'], msg: 'Field required', type: 'missing' }] });
    }
    if (route === 'submit') {
      const id = `req-${next++}`;
      const app = url.pathname.split('/').slice(1, 3).join('/');
      queued.set(id, { app, outcome: nextOutcome, polls: 0 });
      nextOutcome = { completeAfterPolls: 2 };
      return send(res, 200, { ...links(origin, app, id), queue_position: 0 });
    }
    const [, owner, appName, , id] = url.pathname.split('/');
    const request = queued.get(id ?? '');
    if (!route || !request || request.app !== `${owner}/${appName}`) return send(res, 404, { detail: 'Request not found' });
    if (route === 'status') return status(res, origin, id!, request);
    return result(res, origin, id!, request);
  });

  function status(res: ServerResponse, origin: string, id: string, request: QueuedRequest) {
    const base = links(origin, request.app, id);
    if (isComplete(request)) return send(res, 200, { ...base, status: 'COMPLETED', logs: null, metrics: { inference_time: 42.5 } });
    request.polls++;
    if (request.polls === 1) return send(res, 202, { ...base, status: 'IN_QUEUE', queue_position: 3 });
    return send(res, 202, { ...base, status: 'IN_PROGRESS', logs: null });
  }

  function result(res: ServerResponse, origin: string, id: string, request: QueuedRequest) {
    // What fal answers here is not documented; the adapter asks only once the status says COMPLETED.
    if (!isComplete(request)) return send(res, 400, { detail: 'Request is still in progress' });
    if (typeof request.outcome === 'object' && 'failWith' in request.outcome) return answer(res, request.outcome.failWith);
    return send(res, 200, {
      video: { url: `${origin}/files/${id}.mp4`, content_type: 'video/mp4', file_name: `${id}.mp4`, file_size: video.length },
      seed: 1234,
    });
  }

  function answer(res: ServerResponse, given: FalAnswer) {
    if (given === 'hang') return;
    if (given === 'unparsable') return send(res, 200, '{"request_id": ', { 'content-type': 'application/json' });
    send(res, given.status, given.body, given.headers);
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url,
    requests,
    /** The outcome of the next submitted request (by default it completes after two polls). */
    plan(outcome: FalOutcome) {
      nextOutcome = outcome;
    },
    /** The next call to this route gets this answer instead of the usual one. */
    interrupt(route: FalRoute, given: FalAnswer) {
      interruptions.set(route, given);
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export type FakeFal = Awaited<ReturnType<typeof startFakeFal>>;

function routeOf(method: string, path: string): FalRoute | undefined {
  if (method === 'GET' && path.startsWith('/files/')) return 'file';
  if (method === 'POST') return 'submit';
  if (method === 'GET' && /^\/[^/]+\/[^/]+\/requests\/[^/]+\/status$/.test(path)) return 'status';
  if (method === 'GET' && /^\/[^/]+\/[^/]+\/requests\/[^/]+$/.test(path)) return 'result';
  return undefined;
}

function isComplete(request: QueuedRequest): boolean {
  if (request.outcome === 'never') return false;
  return 'failWith' in request.outcome || request.polls >= request.outcome.completeAfterPolls;
}

/** The URLs fal's submit and status answers carry, on the owner and app only. */
function links(origin: string, app: string, id: string) {
  const requestUrl = `${origin}/${app}/requests/${id}`;
  return { request_id: id, response_url: requestUrl, status_url: `${requestUrl}/status`, cancel_url: `${requestUrl}/cancel` };
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(bytes);
}

function isFileInput(value: unknown): boolean {
  return typeof value === 'string' && (/^https?:\/\//.test(value) || /^data:image\/[a-z]+;base64,[A-Za-z0-9+/]+={0,2}$/.test(value));
}
