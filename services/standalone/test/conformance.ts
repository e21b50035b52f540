import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

interface Operation {
  pattern: RegExp;
  method: string;
  path: string;
  op: { security: Array<Record<string, unknown>>; responses: Record<string, { content?: Record<string, { schema?: object }> }> };
}

/**
 * Checks a live answer against the service's own OpenAPI document (`/openapi.json`): its status is
 * documented for the operation (errors included), a JSON body matches the schema of that status (the error
 * shape for every 4xx and 5xx), another body has a documented media type, every answer carries its
 * `x-request-id` and every `/v1` answer the rate-limit headers. An error from a path or method no operation has (404, 405) needs only the error shape.
 */
class Conformance {
  private readonly operations: Operation[];
  private readonly validators = new Map<object, ValidateFunction>();
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true });
  private readonly errorSchema: object;

  constructor(doc: { paths: Record<string, Record<string, Operation['op']>>; components: { schemas: { Error: object } } }) {
    addFormats.default(this.ajv);
    this.errorSchema = doc.components.schemas.Error;
    this.operations = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, op]) => ({
        pattern: new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/]+')}/?$`),
        method: method.toUpperCase(),
        path,
        op,
      })),
    );
  }

  private validate(schema: object, body: unknown): string | undefined {
    let validator = this.validators.get(schema);
    if (!validator) this.validators.set(schema, (validator = this.ajv.compile(schema)));
    return validator(body) ? undefined : this.ajv.errorsText(validator.errors, { dataVar: 'body' });
  }

  problems(method: string, url: URL, status: number, headers: Headers, text: string): string[] {
    const found = this.operations.find((o) => o.method === method && o.pattern.test(url.pathname));
    const what = `${method} ${url.pathname} → ${status}`;
    const problems: string[] = [];
    const type = (headers.get('content-type') ?? '').split(';')[0]!.trim();
    // No test client sends one of its own, so every id is the gateway's.
    if (!/^req_[0-9a-f]{32}$/.test(headers.get('x-request-id') ?? '')) problems.push(`${what}: no x-request-id header`);
    if (url.pathname.startsWith('/v1/')) {
      for (const name of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) {
        if (!/^\d+$/.test(headers.get(name) ?? '')) problems.push(`${what}: no integer ${name} header`);
      }
    }
    if (status >= 400) {
      if (found && !found.op.responses[String(status)]) problems.push(`${what}: status not documented for ${found.method} ${found.path}`);
      if (type !== 'application/json') return [...problems, `${what}: an error answered as '${type}'`];
      const problem = this.validate(this.errorSchema, JSON.parse(text));
      return problem ? [...problems, `${what}: not the error shape: ${problem}`] : problems;
    }
    if (!found) return [...problems, `${what}: no such operation in the OpenAPI document`];
    const response = found.op.responses[String(status)];
    if (!response) return [...problems, `${what}: status not documented for ${found.path}`];
    const media = response.content?.[type];
    if (!media) return [...problems, `${what}: media type '${type}' not documented`];
    if (type === 'application/json' && media.schema) {
      const problem = this.validate(media.schema, JSON.parse(text));
      if (problem) problems.push(`${what}: ${problem}`);
    }
    return problems;
  }
}

const documents = new Map<string, Promise<Conformance>>();

/** Throws, naming every mismatch, when an answer is not what the service's OpenAPI document says. */
export async function expectConformance(baseUrl: string, method: string, url: URL, status: number, headers: Headers, text: string) {
  let conformance = documents.get(baseUrl);
  if (!conformance) {
    conformance = fetch(`${baseUrl}/openapi.json`).then(async (res) => new Conformance((await res.json()) as never));
    documents.set(baseUrl, conformance);
  }
  const problems = (await conformance).problems(method, url, status, headers, text);
  if (problems.length > 0) throw new Error(`The answer does not match the OpenAPI document:\n${problems.join('\n')}`);
}

/**
 * fetch for what the test client cannot send (a form, a Range, a cookie), with the answer checked against the
 * OpenAPI document as the client's are; the Response returned reads as the original would.
 */
export async function conformingFetch(baseUrl: string, url: string | URL, init: RequestInit = {}): Promise<Response> {
  const res = await fetch(url, init);
  const bytes = new Uint8Array(await res.arrayBuffer());
  const json = /^application\/json/.test(res.headers.get('content-type') ?? '');
  await expectConformance(baseUrl, init.method ?? 'GET', new URL(url), res.status, res.headers, json ? new TextDecoder().decode(bytes) : '');
  return new Response(res.status === 204 || res.status === 304 ? null : bytes, { status: res.status, statusText: res.statusText, headers: res.headers });
}

/**
 * The fetch to give an official SDK (`new OpenAI({ fetch })`): every answer it gets is checked against the
 * OpenAPI document as the test client's are. A stream is read whole before the SDK sees it.
 */
export const conformingSdkFetch =
  (baseUrl: string) =>
  (input: string | URL | Request, init?: RequestInit): Promise<Response> =>
    conformingFetch(baseUrl, input instanceof Request ? input.url : input, init);
