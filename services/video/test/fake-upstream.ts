import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface UpstreamJob {
  id: string;
  model: string;
  prompt: string;
  seconds: string;
  size: string;
  status: 'queued' | 'in_progress' | 'completed' | 'failed';
  progress: number;
  error: { code: string; message: string } | null;
  /** The `input_reference` file part, as it arrived. */
  inputReference?: { type: string; bytes: Buffer };
}

/**
 * A local stand-in for OpenAI's Videos API: `POST /videos` (multipart), `GET /videos/{id}`,
 * `GET /videos/{id}/content`, answering with OpenAI's video object and error shapes. Tests move its jobs.
 */
export async function startFakeUpstream(apiKey: string, content: Buffer) {
  const jobs = new Map<string, UpstreamJob>();
  const requests: { method: string; path: string; contentType: string | undefined }[] = [];
  let refuseNextCreate: { status: number; code: string; message: string } | null = null;
  let next = 1;

  const readForm = async (req: IncomingMessage) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const form = await new Response(Buffer.concat(chunks), { headers: { 'content-type': req.headers['content-type'] ?? '' } }).formData();
    const reference = form.get('input_reference');
    return {
      fields: Object.fromEntries([...form.entries()].filter(([, v]) => typeof v === 'string').map(([k, v]) => [k, String(v)])),
      reference: reference instanceof Blob ? { type: reference.type, bytes: Buffer.from(await reference.arrayBuffer()) } : undefined,
    };
  };
  const videoObject = (job: UpstreamJob) => ({
    id: job.id,
    object: 'video',
    created_at: 1_767_225_600,
    completed_at: job.status === 'completed' ? 1_767_225_700 : null,
    expires_at: null,
    model: job.model,
    prompt: job.prompt,
    seconds: job.seconds,
    size: job.size,
    status: job.status,
    progress: job.progress,
    remixed_from_video_id: null,
    error: job.error,
  });

  const server: Server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://upstream');
    requests.push({ method: req.method ?? '', path: url.pathname, contentType: req.headers['content-type'] });
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.headers.authorization !== `Bearer ${apiKey}`) {
      return send(401, { error: { type: 'invalid_request_error', code: 'invalid_api_key', message: 'Incorrect API key provided.' } });
    }
    if (req.method === 'POST' && url.pathname === '/v1/videos') {
      const { fields: form, reference } = await readForm(req);
      if (refuseNextCreate) {
        const refusal = refuseNextCreate;
        refuseNextCreate = null;
        return send(refusal.status, { error: { type: 'invalid_request_error', code: refusal.code, message: refusal.message, param: null } });
      }
      const job: UpstreamJob = {
        id: `video_up${next++}`,
        model: form.model!,
        prompt: form.prompt!,
        seconds: form.seconds!,
        size: form.size!,
        status: 'queued',
        progress: 0,
        error: null,
        ...(reference ? { inputReference: reference } : {}),
      };
      jobs.set(job.id, job);
      return send(200, videoObject(job));
    }
    const m = /^\/v1\/videos\/([^/]+)(\/content)?$/.exec(url.pathname);
    const job = m ? jobs.get(m[1]!) : undefined;
    if (req.method === 'GET' && job && !m![2]) return send(200, videoObject(job));
    if (req.method === 'GET' && job && m![2] && job.status === 'completed') {
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': String(content.length) });
      return res.end(content);
    }
    send(404, { error: { type: 'invalid_request_error', code: 'not_found', message: 'Not found.' } });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    jobs,
    requests,
    refuseNextCreate(status: number, code: string, message: string) {
      refuseNextCreate = { status, code, message };
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
