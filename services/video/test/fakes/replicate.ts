import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local stand-in for the parts of Replicate's HTTP API the official SDK (1.4.0) uses for an official model:
 * `POST /v1/models/{owner}/{name}/predictions` (JSON `{ input }`, 201 with the prediction object),
 * `GET /v1/predictions/{id}`, and the prediction's output file, which needs no key. Errors are Replicate's
 * problem JSON `{ title, detail, status }`. Tests script each prediction and each next answer.
 */

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: unknown;
}

/** How the next created prediction behaves; it succeeds on its first poll unless told otherwise. */
export type PredictionPlan =
  | { outcome: 'succeed'; afterPolls: number; output?: 'url' | 'list' | 'none' }
  | { outcome: 'fail'; afterPolls: number; error: string }
  | { outcome: 'canceled' | 'aborted'; afterPolls: number }
  | { outcome: 'never'; logs?: string };

/** An answer that replaces the next request's own: `raw` is sent as is, else `body` (default: problem JSON). */
export interface ScriptedAnswer {
  status: number;
  body?: unknown;
  raw?: string;
  headers?: Record<string, string>;
}

interface FakePrediction {
  id: string;
  model: string;
  input: Record<string, unknown>;
  plan: PredictionPlan;
  polls: number;
}

export function problem(status: number, title: string, detail: string) {
  return { title, detail, status };
}

/**
 * Each model's documented input ranges and its first-frame image field (see the adapter's sources), so a
 * mistranslated job is a 422 here too. An image is a URL or a data URL (Replicate's "Input files" docs).
 */
const SCHEMAS: Record<string, { duration: [number, number]; enums: Record<string, readonly string[]>; image: string }> = {
  'bytedance/seedance-2.0-fast': {
    duration: [-1, 15],
    enums: { resolution: ['480p', '720p'], aspect_ratio: ['16:9', '4:3', '1:1', '3:4', '9:16', '21:9', '9:21', 'adaptive'] },
    image: 'image',
  },
  'bytedance/seedance-2.0': {
    duration: [-1, 15],
    enums: { resolution: ['480p', '720p', '1080p'], aspect_ratio: ['16:9', '4:3', '1:1', '3:4', '9:16', '21:9', '9:21', 'adaptive'] },
    image: 'image',
  },
  'kwaivgi/kling-v3-video': { duration: [3, 15], enums: { mode: ['standard', 'pro'], aspect_ratio: ['16:9', '9:16', '1:1'] }, image: 'start_image' },
};

/** The image fields of every model here: one sent to a model that has another name for it is refused. */
const IMAGE_FIELDS = ['image', 'start_image'];

function invalidFields(model: string, input: Record<string, unknown>): string[] {
  const schema = SCHEMAS[model]!;
  const problems: string[] = [];
  if (typeof input.prompt !== 'string' || input.prompt === '') problems.push('- input.prompt: Field required');
  const { duration } = input;
  if (duration !== undefined && !(Number.isInteger(duration) && (duration as number) >= schema.duration[0] && (duration as number) <= schema.duration[1])) {
    problems.push(`- input.duration: Input should be an integer from ${schema.duration[0]} to ${schema.duration[1]}`);
  }
  for (const [field, allowed] of Object.entries(schema.enums)) {
    if (input[field] !== undefined && !allowed.includes(input[field] as string)) problems.push(`- input.${field}: Input should be one of ${allowed.join(', ')}`);
  }
  for (const field of IMAGE_FIELDS) {
    if (input[field] === undefined) continue;
    if (field !== schema.image) problems.push(`- input: Additional property ${field} is not allowed`);
    else if (typeof input[field] !== 'string' || !/^(https?:\/\/|data:image\/[a-z]+;base64,[A-Za-z0-9+/]+={0,2}$)/.test(input[field] as string)) {
      problems.push(`- input.${field}: Input should be a valid URI`);
    }
  }
  return problems;
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export async function startFakeReplicate(apiToken: string, video: Buffer) {
  const predictions = new Map<string, FakePrediction>();
  const requests: RecordedRequest[] = [];
  let nextPlan: PredictionPlan = { outcome: 'succeed', afterPolls: 1 };
  let nextAnswers: ScriptedAnswer[] = [];
  let hang: 'api' | 'file' | null = null;
  let counter = 0;
  let origin = '';

  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  };

  const statusOf = (p: FakePrediction): string => {
    if (p.polls === 0) return 'starting';
    if (p.plan.outcome === 'never' || p.polls < p.plan.afterPolls) return 'processing';
    return { succeed: 'succeeded', fail: 'failed', canceled: 'canceled', aborted: 'aborted' }[p.plan.outcome];
  };

  const outputOf = (p: FakePrediction, status: string) => {
    if (status !== 'succeeded' || p.plan.outcome !== 'succeed') return null;
    const url = `${origin}/delivery/${p.id}/output.mp4`;
    return { url, list: [url], none: null }[p.plan.output ?? 'url'];
  };

  /** Replicate's prediction object, as its HTTP reference documents `predictions.get`. */
  const predictionObject = (p: FakePrediction) => {
    const status = statusOf(p);
    const done = ['succeeded', 'failed', 'canceled', 'aborted'].includes(status);
    return {
      id: p.id,
      model: p.model,
      version: 'hidden',
      input: p.input,
      logs: p.plan.outcome === 'never' ? (p.plan.logs ?? '') : '',
      output: outputOf(p, status),
      data_removed: false,
      error: status === 'failed' && p.plan.outcome === 'fail' ? p.plan.error : null,
      source: 'api',
      status,
      created_at: '2026-01-01T00:00:00.000Z',
      started_at: status === 'starting' ? null : '2026-01-01T00:00:01.000Z',
      completed_at: done ? '2026-01-01T00:01:00.000Z' : null,
      urls: { get: `${origin}/v1/predictions/${p.id}`, cancel: `${origin}/v1/predictions/${p.id}/cancel`, web: `${origin}/p/${p.id}` },
    };
  };

  const create = (res: ServerResponse, model: string, body: unknown) => {
    if (!SCHEMAS[model]) return send(res, 404, problem(404, 'Not found', 'The requested resource could not be found.'));
    const input = (body as { input?: unknown } | undefined)?.input;
    if (typeof input !== 'object' || input === null) return send(res, 422, problem(422, 'Input validation failed', '- input: Field required'));
    const invalid = invalidFields(model, input as Record<string, unknown>);
    if (invalid.length > 0) return send(res, 422, problem(422, 'Input validation failed', invalid.join('\n')));
    counter += 1;
    const prediction: FakePrediction = { id: `fk${counter}q2x7vd9rmt0cs`, model, input: input as Record<string, unknown>, plan: nextPlan, polls: 0 };
    nextPlan = { outcome: 'succeed', afterPolls: 1 };
    predictions.set(prediction.id, prediction);
    send(res, 201, predictionObject(prediction));
  };

  const answerScripted = (res: ServerResponse, answer: ScriptedAnswer) => {
    const headers = { 'content-type': 'application/json', ...answer.headers };
    res.writeHead(answer.status, headers);
    res.end(answer.raw ?? JSON.stringify(answer.body ?? problem(answer.status, 'Scripted error', `status ${answer.status}`)));
  };

  const route = (req: IncomingMessage, res: ServerResponse, path: string, body: unknown) => {
    const file = /^\/delivery\/([^/]+)\/output\.mp4$/.exec(path);
    if (req.method === 'GET' && file) {
      const p = predictions.get(file[1]!);
      if (!p || statusOf(p) !== 'succeeded') return send(res, 404, problem(404, 'Not found', 'No such file.'));
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': String(video.length) });
      return res.end(video);
    }
    if (req.headers.authorization !== `Bearer ${apiToken}`) {
      return send(res, 401, problem(401, 'Unauthenticated', 'You did not pass a valid authentication token'));
    }
    const created = /^\/v1\/models\/([^/]+)\/([^/]+)\/predictions$/.exec(path);
    if (req.method === 'POST' && created) return create(res, `${created[1]}/${created[2]}`, body);
    const got = /^\/v1\/predictions\/([^/]+)$/.exec(path);
    const prediction = got ? predictions.get(got[1]!) : undefined;
    if (req.method === 'GET' && prediction) {
      prediction.polls += 1;
      return send(res, 200, predictionObject(prediction));
    }
    send(res, 404, problem(404, 'Not found', 'The requested resource could not be found.'));
  };

  const server = createServer(async (req, res) => {
    const path = new URL(req.url ?? '/', 'http://fake').pathname;
    const body = await readJson(req);
    requests.push({ method: req.method ?? '', path, headers: req.headers, body });
    if (hang && hang === (path.startsWith('/v1/') ? 'api' : 'file')) {
      hang = null;
      return; // never answered: the connection stays open until the client gives up or the fake closes
    }
    const scripted = nextAnswers.shift();
    if (scripted) return answerScripted(res, scripted);
    route(req, res, path, body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    /** What `baseUrl` is for the SDK: the API root, ending in `/v1`. */
    url: `${origin}/v1`,
    video,
    requests,
    /** The next created prediction follows this plan. */
    plan(plan: PredictionPlan) {
      nextPlan = plan;
    },
    /** The next request (of any kind) gets this answer instead of its own. */
    answerNext(answer: ScriptedAnswer) {
      nextAnswers.push(answer);
    },
    /** The next API request (or output file request) is read and never answered. */
    hangNext(kind: 'api' | 'file' = 'api') {
      hang = kind;
    },
    reset() {
      requests.length = 0;
      nextAnswers = [];
      hang = null;
      nextPlan = { outcome: 'succeed', afterPolls: 1 };
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export type FakeReplicate = Awaited<ReturnType<typeof startFakeReplicate>>;
