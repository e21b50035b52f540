import type { IncomingMessage, ServerResponse } from 'node:http';
import type { KeyPrincipal, Reply, Scope } from '@oc/contracts';
import type { ServiceClient } from '@oc/messaging';
import type { z } from 'zod';
import type { RateLimits } from '../application/rate-limits';

export type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

export interface RouteContext<P = KeyPrincipal> {
  /** Node's own request and response: `/v1` and `/admin/v1` are served without Express (the console's API runs under it). */
  req: IncomingMessage;
  res: ServerResponse;
  principal: P;
  params: Record<string, string>;
  query: Record<string, unknown>;
  /** The parsed JSON or form body (a form's file parts as `UploadedFile`s); `{}` when the request had none. */
  body: unknown;
  services: ServiceClient;
  /** For windows only known during the call, e.g. chat tokens per day (`chatTokenWindow`). */
  limits: RateLimits;
  /** Propagated to services (trace context). */
  headers: Record<string, string>;
}

export interface Route<P = KeyPrincipal> {
  method: Method;
  /** Express-style path with `:params`. */
  path: string;
  /** Scope the key needs; null where any valid key of the organization may call (health, balance, models). */
  scope: Scope | null;
  /** Counts against the tier's chat limits. */
  chat?: boolean;
  /** The body names a `model`, which a key's `allowed_models` must include (403 `model_not_allowed` otherwise). */
  model?: boolean;
  /** Body formats accepted (default JSON only); multipart is for clients such as OpenAI's SDK that send forms. */
  body?: 'json' | 'json-or-multipart';
  /** The file parts a multipart body may carry, by name (each read whole, within the body's cap). */
  files?: readonly string[];
  /** For the OpenAPI document: what the route does and the contracts of its body, query and answer. */
  doc?: {
    summary: string;
    request?: z.ZodType;
    /** The request as a form, where it differs from the JSON body (file parts). */
    form?: z.ZodType;
    query?: z.ZodType;
    response?: z.ZodType;
    /** Media types a success may have besides JSON (an event stream, a file). */
    media?: string[];
    /** Honours `Range` (206 with one part). */
    ranges?: boolean;
    /** Honours `Idempotency-Key`. */
    idempotent?: boolean;
    /** Answers a resumable event stream (`Last-Event-ID`) whose events carry this as their `data`. */
    events?: z.ZodType;
    /** Error statuses of its own, besides those every operation of its kind may answer (`errorStatuses`). */
    errors?: number[];
    /** Integer headers a success may carry besides every answer's, with what each means. */
    headers?: Record<string, string>;
  };
  handle(ctx: RouteContext<P>): Promise<Reply<unknown> | void>;
}

export interface CompiledRoute<P> {
  route: Route<P>;
  pattern: RegExp;
  names: string[];
}

export function compile<P>(routes: Route<P>[]): CompiledRoute<P>[] {
  return routes.map((route) => {
    const names: string[] = [];
    const source = route.path.replace(/:([a-z_]+)/g, (_, name: string) => {
      names.push(name);
      return '([^/]+)';
    });
    return { route, pattern: new RegExp(`^${source}/?$`), names };
  });
}

export type Match<P> =
  | { kind: 'found'; route: Route<P>; params: Record<string, string> }
  | { kind: 'method_not_allowed'; allow: Method[] }
  | { kind: 'not_found' };

export function match<P>(routes: CompiledRoute<P>[], method: string, path: string): Match<P> {
  const allow: Method[] = [];
  for (const { route, pattern, names } of routes) {
    const m = pattern.exec(path);
    if (!m) continue;
    if (route.method !== method) {
      allow.push(route.method);
      continue;
    }
    const params: Record<string, string> = {};
    for (const [i, name] of names.entries()) {
      const value = safeDecode(m[i + 1]!);
      // A path segment that is not valid percent-encoding names no resource.
      if (value === undefined) return { kind: 'not_found' };
      params[name] = value;
    }
    return { kind: 'found', route, params };
  }
  return allow.length > 0 ? { kind: 'method_not_allowed', allow } : { kind: 'not_found' };
}

function safeDecode(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}
