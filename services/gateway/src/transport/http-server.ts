import { createServer, type RequestListener, type Server } from 'node:http';
import { z } from 'zod';
import { answerClientErrors } from './http';

/**
 * How long a client may take over a request before the connection is cut (README's table). Node's
 * defaults let a client that sends nothing, or a body shorter than its Content-Length, hold a connection
 * for a minute or more; these are checked every second. Both the gateway's and the standalone's
 * configuration take this shape.
 */
export const HttpServerConfigSchema = z.object({
  /** Until the request line and headers are in. */
  HTTP_HEADERS_TIMEOUT_MS: z.coerce.number().int().positive().default(10_000),
  /** Until the whole request, body included, is in (a response, such as a stream, may take longer). */
  HTTP_REQUEST_TIMEOUT_MS: z.coerce.number().int().positive().default(30_000),
  /** An idle keep-alive connection is closed after this. */
  HTTP_KEEP_ALIVE_TIMEOUT_MS: z.coerce.number().int().positive().default(5_000),
  /** Comma-separated addresses or CIDRs of the load balancers whose `X-Forwarded-For` names the client. */
  TRUSTED_PROXIES: z
    .string()
    .default('')
    .transform((list) => list.split(',').map((entry) => entry.trim()).filter((entry) => entry.length > 0)),
});
export type HttpServerConfig = Omit<z.infer<typeof HttpServerConfigSchema>, 'TRUSTED_PROXIES'>;

/** The gateway's HTTP server: refusals in the spec's shape (408 when a request is too slow), bounded waits. */
export function listenHttp(listener: RequestListener, port: number, host: string, limits: HttpServerConfig): Promise<Server> {
  const server = createServer(
    {
      // Node refuses a headers timeout longer than the request timeout.
      headersTimeout: Math.min(limits.HTTP_HEADERS_TIMEOUT_MS, limits.HTTP_REQUEST_TIMEOUT_MS),
      requestTimeout: limits.HTTP_REQUEST_TIMEOUT_MS,
      connectionsCheckingInterval: Math.max(50, Math.min(1_000, limits.HTTP_HEADERS_TIMEOUT_MS / 2)),
    },
    listener,
  );
  server.keepAliveTimeout = limits.HTTP_KEEP_ALIVE_TIMEOUT_MS;
  answerClientErrors(server);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}
