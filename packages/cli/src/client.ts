import { CliError } from './command';

/** How the CLI talks to one API (`/v1` with an API key, or `/admin/v1` with the admin token). */
export interface Client {
  /** The parsed body of a 2xx answer (undefined when it is empty); the API's error as a `CliError` otherwise. */
  json<T>(method: string, path: string, body?: unknown): Promise<T>;
  /** A 2xx answer whose body the caller reads as a stream (a download, Server-Sent Events). */
  open(method: string, path: string, body: unknown, accept: string, options?: OpenOptions): Promise<Response>;
}

export interface OpenOptions {
  /** Sent besides Accept and Authorization (e.g. `Last-Event-ID`). */
  headers?: Record<string, string>;
  /** Aborts the request and the reading of its body. */
  signal?: AbortSignal;
}

/** `what` names the API in "cannot reach …" messages. */
export function client(what: string, baseUrl: string, token: string | undefined, fetch: typeof globalThis.fetch): Client {
  const send = async (method: string, path: string, body: unknown, accept: string, options: OpenOptions = {}): Promise<Response> => {
    const headers: Record<string, string> = { ...options.headers, accept };
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    try {
      return await fetch(`${baseUrl}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (error) {
      if (options.signal?.aborted) throw error;
      throw new CliError(`cannot reach ${what} at ${baseUrl}: ${reason(error)}`, true);
    }
  };
  const failure = async (response: Response): Promise<CliError> => apiError(response.status, await response.text());
  return {
    async json<T>(method: string, path: string, body?: unknown): Promise<T> {
      const response = await send(method, path, body, 'application/json');
      if (!response.ok) throw await failure(response);
      const text = await response.text();
      try {
        return (text === '' ? undefined : JSON.parse(text)) as T;
      } catch {
        throw new CliError(`HTTP ${response.status}: response is not JSON: ${text.slice(0, 200)}`);
      }
    },
    async open(method, path, body, accept, options) {
      const response = await send(method, path, body, accept, options);
      if (!response.ok) throw await failure(response);
      return response;
    },
  };
}

/** The spec's error body `{error: {message, code}}` as one line: the message, then the code. */
function apiError(status: number, text: string): CliError {
  const retryable = status === 429 || status >= 500;
  if (text === '') return new CliError(`HTTP ${status}`, retryable);
  let error: { message?: string; code?: string } | undefined;
  try {
    error = (JSON.parse(text) as { error?: typeof error }).error;
  } catch {
    return new CliError(`HTTP ${status}: response is not JSON: ${text.slice(0, 200)}`, retryable);
  }
  if (!error?.message) return new CliError(`HTTP ${status}`, retryable);
  return new CliError(error.code ? `${error.message} (${error.code})` : error.message, retryable);
}

/** fetch reports a refused connection as "fetch failed" with the useful part in `cause`. */
export function reason(error: unknown): string {
  return (error as { cause?: { message?: string } }).cause?.message ?? (error as Error).message;
}
