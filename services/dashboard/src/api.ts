import type { ApiErrorBody } from '@oc/contracts';
import { EventSourceParserStream } from 'eventsource-parser/stream';

/** The console's API, on the gateway that served this page. */
export const API = '/console/v1';

/** An answer in the spec's error shape (or a network failure, as status 0). */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly error: ApiErrorBody['error'],
  ) {
    super(error.message);
  }
}

let csrfToken = '';
let onSignedOut: () => void = () => undefined;

/** Set at sign-in and by GET /session; sent with every change. */
export function setCsrfToken(token: string) {
  csrfToken = token;
}

/** Called when an answer says the session is gone, so the app shows the sign-in form again. */
export function whenSignedOut(callback: () => void) {
  onSignedOut = callback;
}

export async function api<T>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET') headers['x-csrf-token'] = csrfToken;
  let res: Response;
  try {
    res = await fetch(`${API}${path}`, {
      method,
      headers,
      credentials: 'same-origin',
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  } catch {
    throw new ApiFailure(0, { type: 'network_error', code: 'network_error', message: 'The service could not be reached. Check your connection and try again.' });
  }
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (!res.ok) {
    const error = (parsed as ApiErrorBody | undefined)?.error ?? { type: 'api_error', code: 'internal_error', message: `HTTP ${res.status}` };
    if (res.status === 401 && error.code === 'invalid_session' && path !== '/session') onSignedOut();
    throw new ApiFailure(res.status, error);
  }
  return parsed as T;
}

/**
 * POSTs `body` and hands each Server-Sent Event's `data` to `onData` as it arrives, until `[DONE]` or the end of
 * the stream. A refusal, or an error event ending the stream, is thrown as `ApiFailure`, as `api` does.
 */
export async function apiStream(path: string, body: unknown, onData: (data: unknown) => void, signal?: AbortSignal): Promise<void> {
  let res: Response;
  try {
    res = await fetch(`${API}${path}`, {
      method: 'POST',
      headers: { accept: 'text/event-stream', 'content-type': 'application/json', 'x-csrf-token': csrfToken },
      credentials: 'same-origin',
      body: JSON.stringify(body),
      ...(signal ? { signal } : {}),
    });
  } catch {
    if (signal?.aborted) return;
    throw new ApiFailure(0, { type: 'network_error', code: 'network_error', message: 'The service could not be reached. Check your connection and try again.' });
  }
  if (!res.ok || !res.body) {
    const parsed = (await res.json().catch(() => undefined)) as ApiErrorBody | undefined;
    throw new ApiFailure(res.status, parsed?.error ?? { type: 'api_error', code: 'internal_error', message: `HTTP ${res.status}` });
  }
  const events = res.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
  for (;;) {
    const { done, value } = await events.read();
    if (done || value.data === '[DONE]') return;
    const data = JSON.parse(value.data) as { error?: ApiErrorBody['error'] };
    // A stream that fails after it started ends with an event in the spec's error shape.
    if (data.error) throw new ApiFailure(res.status, data.error);
    onData(data);
  }
}

export const query = (params: Record<string, string | number | undefined>) => {
  const entries = Object.entries(params).filter((e): e is [string, string | number] => e[1] !== undefined);
  return entries.length === 0 ? '' : `?${new URLSearchParams(entries.map(([k, v]) => [k, String(v)]))}`;
};
