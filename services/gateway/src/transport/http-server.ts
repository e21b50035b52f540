import { createServer, type RequestListener, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { rateLimited } from '@oc/contracts';
import proxyAddr from 'proxy-addr';
import { z } from 'zod';
import { answerProtocolErrors, checkedRequests, rawAnswer } from './protocol-answers';

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
  /** Connections one client address may hold open at once; the load balancers in TRUSTED_PROXIES are exempt. */
  HTTP_MAX_CONNECTIONS_PER_ADDRESS: z.coerce.number().int().positive().default(256),
  /** Comma-separated addresses or CIDRs of the load balancers whose `X-Forwarded-For` names the client. */
  TRUSTED_PROXIES: z
    .string()
    .default('')
    .transform((list) => list.split(',').map((entry) => entry.trim()).filter((entry) => entry.length > 0))
    .refine(compiles, 'must be comma-separated IP addresses or CIDRs, or loopback, linklocal, uniquelocal'),
});

/** Whether proxy-addr, which decides who the trusted proxies are, accepts the list. */
function compiles(list: string[]): boolean {
  try {
    proxyAddr.compile(list);
    return true;
  } catch {
    return false;
  }
}
export type HttpServerConfig = Omit<z.infer<typeof HttpServerConfigSchema>, 'TRUSTED_PROXIES'>;

/**
 * The gateway's HTTP server: refusals in the spec's shape (408 when a request is too slow, 429 to a client
 * address holding too many connections, what HTTP itself refuses), bounded waits.
 */
export function listenHttp(
  listener: RequestListener,
  port: number,
  host: string,
  limits: HttpServerConfig,
  trustedProxies: readonly string[] = [],
): Promise<Server> {
  const server = createServer(
    {
      // Node refuses a headers timeout longer than the request timeout.
      headersTimeout: Math.min(limits.HTTP_HEADERS_TIMEOUT_MS, limits.HTTP_REQUEST_TIMEOUT_MS),
      requestTimeout: limits.HTTP_REQUEST_TIMEOUT_MS,
      connectionsCheckingInterval: Math.max(50, Math.min(1_000, limits.HTTP_HEADERS_TIMEOUT_MS / 2)),
      // Node's refusal of a request without Host has an empty body: checkedRequests refuses it in the spec's shape.
      requireHostHeader: false,
    },
    checkedRequests(listener),
  );
  server.keepAliveTimeout = limits.HTTP_KEEP_ALIVE_TIMEOUT_MS;
  answerProtocolErrors(server);
  capConnectionsPerAddress(server, limits.HTTP_MAX_CONNECTIONS_PER_ADDRESS, trustedProxies);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

/**
 * One address holding more than `max` connections (idle sockets, slow uploads) is refused the next one with
 * a 429 in the spec's shape, and the connection closed. A load balancer carries every client's connections,
 * so the addresses in TRUSTED_PROXIES are not counted.
 */
function capConnectionsPerAddress(server: Server, max: number, trustedProxies: readonly string[]): void {
  const trusted = proxyAddr.compile([...trustedProxies]);
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress;
    if (address === undefined || trusted(address, 0)) return;
    const count = (open.get(address) ?? 0) + 1;
    if (count > max) {
      socket.end(rawAnswer(429, 'Too Many Requests', rateLimited(1, `${max} connections per client address`), { 'Retry-After': '1' }));
      return;
    }
    open.set(address, count);
    socket.once('close', () => {
      const left = open.get(address)! - 1;
      if (left === 0) open.delete(address);
      else open.set(address, left);
    });
  });
}
