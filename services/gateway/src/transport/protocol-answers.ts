/**
 * What HTTP itself refuses before any route sees the request, answered in the spec's error shape: Node's own
 * answers to these have an empty body, or none at all (CONNECT closes the connection unanswered).
 */
import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { ApiError, invalidRequest } from '@oc/contracts';
import { closeLingering, isClosing } from './lingering-close';
import { newRequestId, REQUEST_ID_HEADER } from './request-id';

/** An answer written straight to a socket that no response owns, which is then closed. Never logged: the id lets a client quote it. */
export function rawAnswer(status: number, reason: string, error: ApiError, headers: Record<string, string> = {}): string {
  const json = JSON.stringify(error.toBody());
  const extra = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
  return `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(json)}\r\n${extra}${REQUEST_ID_HEADER}: ${newRequestId()}\r\nConnection: close\r\n\r\n${json}`;
}

/** What Node's HTTP parser refuses, in the spec's terms. */
function clientErrorBody(code: string | undefined): { status: number; reason: string; body: ApiError } {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return {
        status: 431,
        reason: 'Request Header Fields Too Large',
        body: new ApiError({
          status: 431,
          type: 'invalid_request_error',
          code: 'request_header_fields_too_large',
          message: 'The request line and headers exceed 16 KiB.',
        }),
      };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return {
        status: 408,
        reason: 'Request Timeout',
        body: new ApiError({ status: 408, type: 'invalid_request_error', code: 'request_timeout', message: 'The request was not received in time.' }),
      };
    default:
      return {
        status: 400,
        reason: 'Bad Request',
        body: invalidRequest('malformed_request', 'The request is not valid HTTP/1.1 (its request line, headers or framing).'),
      };
  }
}

const missingHost = () => invalidRequest('missing_parameter', 'An HTTP/1.1 request needs a Host header.', 'Host');

const unmetExpectation = () =>
  new ApiError({
    status: 417,
    type: 'invalid_request_error',
    code: 'expectation_failed',
    message: "The only expectation met here is 'Expect: 100-continue'.",
    param: 'Expect',
  });

const noTunnels = () =>
  new ApiError({
    status: 405,
    type: 'invalid_request_error',
    code: 'method_not_allowed',
    message: 'CONNECT is not served: this is an API, not a proxy.',
  });

/** A refusal on a request's own response, closing the connection (lingering, so a client still sending reads it). */
function refuse(req: IncomingMessage, res: ServerResponse, error: ApiError) {
  closeLingering(req, res);
  const json = JSON.stringify(error.toBody());
  res.writeHead(error.status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(json),
    [REQUEST_ID_HEADER]: newRequestId(),
  });
  res.end(json);
}

/**
 * The listener behind the checks the server is left to make itself (`requireHostHeader: false`, so that the
 * refusal has a body): an HTTP/1.1 request without `Host` is refused (RFC 9112, 3.2), and a request the parser
 * still finds on a connection that answered `Connection: close` is not served (RFC 9112, 9.6).
 */
export function checkedRequests(listener: RequestListener): RequestListener {
  return (req, res) => {
    if (isClosing(req.socket)) {
      req.socket.destroy();
      return;
    }
    if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor === 1) return refuse(req, res, missingHost());
    listener(req, res);
  };
}

/**
 * Answers in the spec's shape what Node would answer with an empty body or not at all: what its parser refuses
 * (a URL over 16 KiB, control characters in a header, both Content-Length and Transfer-Encoding, a request too
 * slow), an `Expect` other than `100-continue` (417), and CONNECT (405: no tunnels here). The connection is
 * closed after each: it cannot be trusted to frame another request.
 */
export function answerProtocolErrors(server: Server): void {
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    if (error.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const { status, reason, body } = clientErrorBody(error.code);
    socket.end(rawAnswer(status, reason, body));
  });
  server.on('checkExpectation', (req, res) => refuse(req, res, unmetExpectation()));
  // An empty Allow: the target of a CONNECT, a tunnel, allows no method here (RFC 9110, 10.2.1).
  server.on('connect', (_req, socket: Duplex) => socket.end(rawAnswer(405, 'Method Not Allowed', noTunnels(), { Allow: '' })));
}
