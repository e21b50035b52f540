import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { activeTrace, setActiveSpanAttributes } from '@oc/telemetry';
import type { Logger } from 'pino';

/** OpenAI's header: its SDKs show it as `_request_id` on every result and `requestID` on every error. */
export const REQUEST_ID_HEADER = 'x-request-id';

/** What a load balancer makes (nginx's `$request_id`, Envoy's UUIDs), bounded so that one log line stays readable. */
const SANE_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** `req_` and 32 hex digits, the form of OpenAI's ids. */
export const newRequestId = () => `req_${randomUUID().replaceAll('-', '')}`;

const ORGANIZATION = Symbol('organization');
type Noted = ServerResponse & { [ORGANIZATION]?: string };

/** The organization a request was made for, once its key is known: its log line names it. */
export function noteOrganization(res: ServerResponse, orgId: string): void {
  (res as Noted)[ORGANIZATION] = orgId;
}

/** The id of the request this answers, for a log line written while answering it. */
export const requestIdOf = (res: ServerResponse) => res.getHeader(REQUEST_ID_HEADER) as string | undefined;

/** The trace's id as the request's, unless the client chose that trace (its own `traceparent`, not a proxy's). */
function ourId(req: IncomingMessage, traceId: string | undefined, fromTrustedProxy: (req: IncomingMessage) => boolean): string {
  if (traceId === undefined) return newRequestId();
  const chosen = [req.headers.traceparent].flat().some((sent) => sent?.includes(traceId)) && !fromTrustedProxy(req);
  return chosen ? newRequestId() : `req_${traceId}`;
}

/**
 * Names a request: its answer carries the id in `x-request-id`, its server span (with telemetry on) in the
 * attribute the semantic conventions give a response header, and its one log line, written when the answer
 * is done, as `request_id` (with the trace id). The id is ours, made here, unless a load balancer of
 * TRUSTED_PROXIES sent one: only the operator's own proxy is believed, as with `X-Forwarded-For`. A client's
 * own id is never echoed, since another client could send the same one; it is logged as `client_request_id`.
 * With telemetry on, our id is `req_` and the trace id of the request's server span, so that the id a customer
 * quotes finds the trace; a trace the client chose itself (its own `traceparent`) is no id of ours, and the
 * request gets a random one, as every request does with telemetry off.
 */
export function nameRequest(req: IncomingMessage, res: ServerResponse, logger: Logger, fromTrustedProxy: (req: IncomingMessage) => boolean): string {
  const sent = req.headers[REQUEST_ID_HEADER];
  const supplied = typeof sent === 'string' && SANE_ID.test(sent) ? sent : undefined;
  const traceId = activeTrace()?.traceId;
  const id = supplied !== undefined && fromTrustedProxy(req) ? supplied : ourId(req, traceId, fromTrustedProxy);
  res.setHeader(REQUEST_ID_HEADER, id);
  setActiveSpanAttributes({ [`http.response.header.${REQUEST_ID_HEADER}`]: [id] });
  if (!logger.isLevelEnabled('info')) return id;
  const started = performance.now();
  const { method } = req;
  const url = req.url ?? '/';
  const query = url.indexOf('?');
  res.once('close', () => {
    const orgId = (res as Noted)[ORGANIZATION];
    logger.info(
      {
        request_id: id,
        ...(supplied !== undefined && supplied !== id ? { client_request_id: supplied } : {}),
        ...(traceId ? { trace_id: traceId } : {}),
        method,
        path: query === -1 ? url : url.slice(0, query),
        status: res.statusCode,
        duration_ms: Math.round((performance.now() - started) * 10) / 10,
        ...(orgId ? { org_id: orgId } : {}),
        // The client left before the whole answer was written (a stream it stopped reading, a cancelled download).
        ...(res.writableFinished ? {} : { aborted: true }),
      },
      'request',
    );
  });
  return id;
}
